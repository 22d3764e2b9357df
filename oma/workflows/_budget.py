"""A task's share of its team run's budgets, as the task's ``AgentRun`` keeps
it, and the team run's books of what its tasks spent.

After each model turn the run reports its usage to the ``TeamRun`` (the
``task_usage`` signal) and waits for the answer (its own ``budget`` signal)
before it acts on the turn, so the model loop's budget check
(``RunBudget.exceeded``) sees what every task in flight spent, not only this
one (``oma.core.contracts.budget``). The team run keeps its books in ``RunSpending``
(the rules: ``oma.core.rules.team_budget``).
"""

from __future__ import annotations

from collections.abc import Callable, Container
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from oma.core.contracts.budget import BudgetGrant, RunBudget, UsageReport
    from oma.core.contracts.llm import LlmTurnInput, LlmTurnOutput
    from oma.core.contracts.names import SignalName
    from oma.core.contracts.ports import ModelPort
    from oma.core.contracts.workflow_ids import task_workflow_id
    from oma.core.rules.team_budget import BudgetSpent, TeamBudget, count_attempt
    from oma.core.schema.results import AgentRunResult
    from oma.core.schema.run_input import RunOptions
    from oma.core.schema.run_state import TeamRunState
    from oma.core.schema.task import TaskState
    from oma.core.schema.usage import TokenUsage
    from oma.workflows import _patches
    from oma.workflows._signals import BackgroundSignals


class SharedBudget:
    """``budget`` of the run of task ``task_id``, kept in step with its team
    run. ``granted`` is the ``budget`` signal's handler."""

    def __init__(self, budget: RunBudget, task_id: str, parent_id: str) -> None:
        self.budget = budget
        self._task_id = task_id
        self._parent_id = parent_id
        self._used = TokenUsage()
        self.sent = 0
        self._answered = 0

    async def turn_used(self, usage: TokenUsage) -> None:
        """Report the attempt's usage with this turn's ``usage`` and wait for
        the team run's answer."""
        self._used += usage
        self.sent += 1
        report = UsageReport(task_id=self._task_id, seq=self.sent, usage=self._used)
        parent = workflow.get_external_workflow_handle(self._parent_id)
        await parent.signal(SignalName.TASK_USAGE, report)
        await workflow.wait_condition(lambda: self._answered >= self.sent)

    def granted(self, raw: Any) -> None:
        try:
            grant = BudgetGrant.model_validate(raw)
        except ValidationError:
            workflow.logger.warning("ignored a budget signal that is not a BudgetGrant")
            return
        self._answered = max(self._answered, grant.seq)
        self.budget.granted(self._used, grant)


class BudgetedModel:
    """``ModelPort``: ``model``'s turns, each reported to ``shared``."""

    def __init__(self, model: ModelPort, shared: SharedBudget) -> None:
        self._model = model
        self._shared = shared

    async def turn(self, inp: LlmTurnInput) -> LlmTurnOutput:
        out = await self._model.turn(inp)
        await self._shared.turn_used(out.usage)
        return out


def shared_budget(budget: RunBudget | None, task_id: str | None) -> SharedBudget | None:
    """The shared budget of a task's run with a ``budget`` (``None`` for a
    standalone run, a run without a budget, and runs from before the patch)."""
    parent = workflow.info().parent
    if budget is None or task_id is None or parent is None:
        return None
    if not _patches.patched(_patches.SHARED_BUDGET):
        return None
    return SharedBudget(budget, task_id, parent.workflow_id)


class TaskSpending:
    """The team run's side: what each task in flight reported of its current
    attempt (``task_usage``), and the answers (``budget`` signals) to them."""

    def __init__(self) -> None:
        self._reports: dict[str, UsageReport] = {}
        self.signals = BackgroundSignals()

    def report(self, raw: Any, running: Container[str]) -> UsageReport | None:
        """Record a ``task_usage`` signal's report of a task in ``running``;
        ``None`` for anything else (a malformed or stray signal)."""
        try:
            report = UsageReport.model_validate(raw)
        except ValidationError:
            workflow.logger.warning("ignored a task_usage signal that is not a UsageReport")
            return None
        if report.task_id not in running:
            return None
        self._reports[report.task_id] = report
        return report

    def merged(self, task_id: str, result: AgentRunResult) -> AgentRunResult:
        """``result`` of the task's attempt with what its run reported where
        the result knows less: a cancelled attempt's result is built by the
        team run, which only the report tells what the attempt used."""
        report = self._reports.get(task_id)
        if report is None:
            return result
        update: dict[str, Any] = {}
        if report.usage.total_tokens > result.token_usage.total_tokens:
            update["token_usage"] = report.usage
        if report.backend_attempts > result.backend_attempts:
            update["backend_attempts"] = report.backend_attempts
        return result.model_copy(update=update)

    def settled(self, task_id: str) -> None:
        """The task's attempt ended: its usage is in its result from now on."""
        self._reports.pop(task_id, None)

    def total(self) -> TokenUsage:
        """What the tasks in flight used so far, together."""
        return sum((r.usage for r in self._reports.values()), TokenUsage())

    def answer(self, task_id: str, grant: Callable[[int], BudgetGrant]) -> None:
        """Send the run of ``task_id`` the ``grant`` for its latest report
        (none to a cancelled one)."""
        report = self._reports[task_id]
        if not report.cancelled:
            child = task_workflow_id(workflow.info().workflow_id, task_id)
            self.signals.send(child, SignalName.BUDGET, grant(report.seq))

    def answer_all(self, grant: Callable[[int], BudgetGrant]) -> None:
        """Send every task in flight that reported the ``grant`` (the budget
        is spent: each stops before its next model turn)."""
        for task_id in sorted(self._reports):
            self.answer(task_id, grant)


async def report_cancelled(
    task_id: str | None, result: AgentRunResult, budget: SharedBudget | None
) -> None:
    """Tell the team run what a cancelled attempt used (``UsageReport`` with
    ``cancelled``); nothing for a standalone run or one from before the patch."""
    parent = workflow.info().parent
    if task_id is None or parent is None:
        return
    if not _patches.patched(_patches.CANCELLED_ATTEMPT_REPORTED):
        return
    report = UsageReport(
        task_id=task_id,
        seq=budget.sent if budget is not None else 0,
        usage=result.token_usage,
        backend_attempts=result.backend_attempts,
        cancelled=True,
    )
    await workflow.get_external_workflow_handle(parent.workflow_id).signal(
        SignalName.TASK_USAGE, report
    )


class RunSpending:
    """A team run's books: what its tasks and coordinator used (in its
    ``state``), what the tasks in flight reported (``tasks``), and what the
    run may still spend of ``options.max_token_budget`` and
    ``options.max_cost_usd``. It answers whether a budget is used up
    (``over_budget``, a question); the run stops itself where it finds
    one is (``TeamRun._stop_if_over_budget``)."""

    def __init__(self, state: TeamRunState, options: RunOptions) -> None:
        self.start_from(state, options)
        self.tasks = TaskSpending()

    def start_from(self, state: TeamRunState, options: RunOptions) -> None:
        """Keep the books of ``state`` under ``options`` (its budgets): as
        the run starts, and again when it goes on over the state it read (a
        fork's, or a reuse's: ``TeamRun._start_from``; no task ran or
        reported while it read)."""
        self._state = state
        self._budget = TeamBudget(state, options.max_token_budget, options.max_cost_usd)

    def reported(self, raw: Any, running: Container[str]) -> UsageReport | None:
        """A ``task_usage`` signal of a task in ``running``: counted (to be
        answered, ``answer``); ``None`` for a malformed or stray signal."""
        return self.tasks.report(raw, running)

    def answer(self, report: UsageReport) -> None:
        """Answer the task's ``report`` with what the run may still spend."""
        self.tasks.answer(report.task_id, self.grant)

    def grant(self, seq: int) -> BudgetGrant:
        """What the run may still spend, the tasks in flight counted, as the
        answer to a task's ``seq``-th report (0: an attempt's input)."""
        return self._budget.grant(seq, self.tasks.total())

    def over_budget(self) -> BudgetSpent | None:
        """The token or the cost budget used up, the tasks in flight counted
        (with why, and whether it is the first time: ``BudgetSpent``);
        ``None`` while both hold. A question: nothing changes."""
        return self._budget.spent(self.tasks.total())

    def stopped(self) -> None:
        """The run stopped on a budget: every task in flight that reported is
        told what is left, nothing (each stops before its next model turn)."""
        self.tasks.answer_all(self.grant)

    def count_attempt(self, task: TaskState, result: AgentRunResult) -> None:
        """One attempt of ``task`` ended with ``result``: count what it used."""
        count_attempt(self._state, task, result)
        self.tasks.settled(task.id)  # its usage is in its state from now on

    def count_step(self, result: AgentRunResult) -> None:
        """A coordinator step ended: count its turns and usage."""
        self._state.add_coordinator_run(result)
