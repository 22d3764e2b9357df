"""``oma acp``: a durable team as an Agent Client Protocol agent on stdio.

Editors (Zed, JetBrains IDEs, Neovim, Emacs) and headless clients (``acpx``)
drive a team run as they drive any ACP agent: a session is a ``TeamRun``
(its ``sessionId`` is the workflow id), a prompt is its goal, the run's
plan and tasks stream as ``plan`` updates and tool calls, its approvals
arrive as permission prompts, and killing the process loses nothing: the
run goes on, and ``session/load`` reattaches (docs/editors.md).

By concern: ``serve`` (the process: stdio, logs, the Temporal connection),
``stdio``, ``agent`` (``TeamAgent``: the protocol's methods, the sessions),
``follower`` (one run's queries in, session updates out), ``cards`` (what
the editor shows of a run's state), ``permissions`` (approvals as permission
prompts), ``commands`` (``/status``, ``/abort``, ``/approve``, ``/reject``,
``/retry``), ``retry`` (``/retry``: a fork of the session's latest run),
``prompt`` (a prompt as a goal), ``team_file`` (the session's team).
"""

from __future__ import annotations

from oma.cli.acp_agent.serve import acp_command

__all__ = ["acp_command"]
