"""The old paths of moved modules, kept importing for a while.

``MOVED`` maps each old dotted path to the module now there. ``install``
(called by ``oma/__init__.py``) adds one finder to ``sys.meta_path`` that
answers only for those old names: importing one emits a
``DeprecationWarning`` naming the new path and binds the old name to the
new module itself (``sys.modules``), so ``import oma.codec`` and
``import oma.runtime.codec`` give the same module object. Standard library
only, and nothing imported until an old name is asked for.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

MOVED: dict[str, str] = {
    # the command line
    "oma._cli_common": "oma.cli.common",
    "oma._cli_control": "oma.cli.control",
    "oma._cli_run": "oma.cli.run",
    "oma._cli_show": "oma.cli.show",
    "oma._forkserver": "oma.cli.forkserver",
    "oma._live": "oma.cli.live",
    "oma._run_view": "oma.cli.viewer.model",
    "oma._run_view_html": "oma.cli.viewer.html",
    "oma._summary": "oma.cli.summary",
    # the in-process agent
    "oma._agent_ports": "oma.agent.ports",
    # the runtime
    "oma._logging": "oma.runtime.logs",
    "oma._span_attributes": "oma.runtime.span_attributes",
    "oma.codec": "oma.runtime.codec",
    "oma.codec_server": "oma.runtime.codec_server",
    "oma.connection": "oma.runtime.connection",
    "oma.dev_server": "oma.runtime.dev_server",
    "oma.plugin": "oma.runtime.plugin",
    "oma.tracing": "oma.runtime.tracing",
    # the core
    "oma.core.acp": "oma.core.contracts.acp",
    "oma.core.agent_config": "oma.core.schema.agent_config",
    "oma.core.agent_events": "oma.core.schema.agent_events",
    "oma.core.agent_loop": "oma.core.rules.agent_loop",
    "oma.core.agent_run": "oma.core.rules.agent_run",
    "oma.core.approval_gate": "oma.core.rules.approval_gate",
    "oma.core.approvals": "oma.core.schema.approvals",
    "oma.core.backends": "oma.core.schema.backends",
    "oma.core.before_run": "oma.core.schema.before_run",
    "oma.core.budget": "oma.core.contracts.budget",
    "oma.core.dag": "oma.core.schema.dag",
    "oma.core.dispatch": "oma.core.rules.dispatch",
    "oma.core.errors": "oma.core.schema.errors",
    "oma.core.evaluation": "oma.core.schema.evaluation",
    "oma.core.limits": "oma.core.schema.limits",
    "oma.core.llm": "oma.core.contracts.llm",
    "oma.core.mcp": "oma.core.schema.mcp",
    "oma.core.message_guard": "oma.core.schema.message_guard",
    "oma.core.messages": "oma.core.schema.messages",
    "oma.core.payload_fit": "oma.core.rules.payload_fit",
    "oma.core.plan": "oma.core.schema.plan",
    "oma.core.ports": "oma.core.contracts.ports",
    "oma.core.pricing": "oma.core.schema.pricing",
    "oma.core.process": "oma.core.contracts.process",
    "oma.core.prompt": "oma.core.rules.prompt",
    "oma.core.providers": "oma.core.schema.providers",
    "oma.core.redact": "oma.core.rules.redact",
    "oma.core.results": "oma.core.schema.results",
    "oma.core.run_events": "oma.core.schema.run_events",
    "oma.core.run_hooks": "oma.core.contracts.run_hooks",
    "oma.core.run_input": "oma.core.schema.run_input",
    "oma.core.scheduling": "oma.core.rules.scheduling",
    "oma.core.shared_memory": "oma.core.rules.shared_memory",
    "oma.core.task": "oma.core.schema.task",
    "oma.core.task_graph": "oma.core.rules.task_graph",
    "oma.core.team": "oma.core.schema.team",
    "oma.core.team_run_state": "oma.core.rules.team_run_state",
    "oma.core.tools": "oma.core.schema.tools",
    "oma.core.usage": "oma.core.schema.usage",
    "oma.core.validation": "oma.core.schema.validation",
    "oma.core.visibility": "oma.core.contracts.visibility",
    "oma.core.workflow_ids": "oma.core.contracts.workflow_ids",
}
"""Old dotted path -> the module's path now. (``oma.cli``, ``oma.client`` and
``oma.agent`` were modules and are packages now, under the same names.) An
old path is that module: a name that has moved on since is not in it
(``oma.core.evaluation``'s ``evaluate`` and sampling helpers are
``oma.core.rules.evaluation``'s, ``oma.core.scheduling``'s
``check_assignments`` is ``oma.core.schema.team``'s)."""


class _Alias:  # an importlib.abc.Loader, without importing importlib.abc
    """The loader of an old name: the module is the new one, already executed."""

    def __init__(self, new: str) -> None:
        self.new = new
        self.spec: ModuleSpec | None = None

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        warnings.warn(
            f"{spec.name} has moved to {self.new}; import it from there",
            DeprecationWarning,
            stacklevel=2,  # (the import machinery's own frames are skipped)
        )
        module = importlib.import_module(self.new)
        self.spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run, but the module's own ``__spec__`` to put back (the
        import machinery set the old name's)."""
        module.__spec__ = self.spec


class MovedFinder:
    """A ``sys.meta_path`` finder for the names in ``MOVED``."""

    OMA_MOVED = True
    """Marks the finder, whichever copy of this module made it (``install``)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        new = MOVED.get(fullname)
        return None if new is None else ModuleSpec(fullname, _Alias(new))  # type: ignore[arg-type]


def install() -> None:
    """Add ``MovedFinder`` to the end of ``sys.meta_path`` once (the real
    modules are found first)."""
    if not any(getattr(finder, "OMA_MOVED", False) for finder in sys.meta_path):
        sys.meta_path.append(MovedFinder())
