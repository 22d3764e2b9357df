"""What workflows and activities pass each other: the inputs and outputs of
the activities (``llm``, ``process``, ``acp``, ``run_hooks``), what a
``TeamRun`` grants its ``AgentRun`` s (``budget``), the ports of an agent run
(``ports``), the search attributes and readable texts of a run
(``visibility``) and the workflow ids of a run's children (``workflow_ids``)."""
