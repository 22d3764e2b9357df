"""What workflows, activities and the client pass each other, on the wire:
the names of the workflows, activities, signals, queries and updates
(``names``); the inputs and outputs of the activities (``llm``, ``tools``,
``mcp``, ``process``, ``acp``, ``run_hooks``, ``task_outputs``, ``fork``,
``visibility``); the signals' payloads (``tool_requests``, and ``budget``:
what a ``TeamRun`` grants its ``AgentRun`` s and what they report); the
ports of an agent run (``ports``); the search attributes and readable texts
of a run (``visibility``), the workflow ids of a run's children
(``workflow_ids``) and the metadata an encrypted payload carries
(``encoding``)."""
