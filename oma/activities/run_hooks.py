"""The ``before_run`` and ``evaluate`` activities: user code around an agent run."""

from __future__ import annotations

from temporalio import activity

from oma.core.contracts.names import ActivityName
from oma.core.contracts.run_hooks import BeforeRunInput, BeforeRunOutput, EvaluateInput
from oma.core.rules import evaluation
from oma.core.rules.evaluation import load_evaluator
from oma.core.schema.before_run import BeforeRunContext, apply_before_run, load_hook
from oma.core.schema.errors import ActivityFailedError, OMAError
from oma.core.schema.evaluation import EvaluationRecord
from oma.core.schema.message_guard import latest_user_prompt


@activity.defn(name=ActivityName.BEFORE_RUN)
async def before_run(inp: BeforeRunInput) -> BeforeRunOutput:
    """Load ``inp.hook`` on this worker and apply it (``oma.core.schema.before_run``).

    Raises (a worker records a non-retryable failure of its code): ``INVALID_HOOK`` when the
    hook cannot be loaded, ``INVALID_MESSAGE`` when it returns invalid
    messages, or changes the messages of an external agent.
    """
    try:
        hook = load_hook(inp.hook)
        ctx = BeforeRunContext(
            agent=inp.agent, messages=inp.messages, prompt=latest_user_prompt(inp.messages)
        )
        return BeforeRunOutput(messages=await apply_before_run(hook, ctx, external=inp.external))
    except OMAError:
        raise
    except Exception as err:
        # the user's code raised: say so under a code of ours (the SDK would
        # make the exception's class name, e.g. TypeError, the task's code)
        raise ActivityFailedError(_hook_raised(inp.hook, err)) from err


def _hook_raised(hook: str, err: Exception) -> str:
    said = f"before_run hook {hook!r} raised {type(err).__name__}: {err}"
    if isinstance(err, TypeError) and "BeforeRunContext" in str(err):
        # ctx["prompt"], the first thing a newcomer writes
        said += " (its argument is a BeforeRunContext, read by attribute: ctx.prompt)"
    return said


@activity.defn(name=ActivityName.EVALUATE)
async def evaluate(inp: EvaluateInput) -> EvaluationRecord:
    """Run the online evaluator on a sampled run; its failures are recorded in
    the record, never raised. ``INVALID_HOOK`` when it cannot be loaded."""
    evaluator = load_evaluator(inp.config.evaluator)
    return await evaluation.evaluate(inp.config, evaluator, inp.input, inp.output)
