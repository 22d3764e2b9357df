"""What a user writes and reads: the run input (``run_input``), agents
(``agent_config``, ``backends``, ``tools``, ``mcp``, ``providers``), teams,
tasks and plans, messages, approvals, evaluation, results and events, the
state a ``TeamRun`` carries (``run_state``), a fork's input (``fork``), usage
and prices, the error catalogue (``errors``); and the checks of what is
written (``limits``, ``validation``, ``message_guard``, ``dag``)."""
