"""``oma acp``: a durable team as an Agent Client Protocol agent on stdio.

Editors (Zed, JetBrains IDEs, Neovim, Emacs) and headless clients (``acpx``)
drive a team run as they drive any ACP agent: a session is a ``TeamRun``
(its ``sessionId`` is the workflow id), a prompt is its goal, the run's
plan and tasks stream as ``plan`` updates and tool calls, its approvals
arrive as permission prompts, and killing the process loses nothing: the
run goes on, and ``session/load`` reattaches (docs/editors.md).

By concern: ``serve`` (the process: stdio, logs, the Temporal connection),
``stdio``, ``agent`` (``TeamAgent``: the protocol's methods, the sessions),
``follower`` (one run's queries in, session updates out), ``tool_calls``
(what the editor shows of a run's state: its ``plan``, a tool call per
task), ``permission_requests`` (approvals as ``session/request_permission``),
``commands`` (``/status``, ``/abort``, ``/approve``, ``/reject``,
``/retry``), ``retry`` (``/retry``: a fork of the session's latest run),
``session_fork`` (``session/fork``), ``prompt`` (a prompt as a goal),
``team_file`` (the session's team). It imports the client and the core,
never the command line (``oma.cli``), whose ``oma acp`` serves it.
"""

from __future__ import annotations

from oma.acp.serve import acp_command

__all__ = ["acp_command"]
