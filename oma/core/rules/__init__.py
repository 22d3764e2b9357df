"""The pure logic of a run: the task graph (``task_graph``), the approval
gate (``approval_gate``), dispatch and scheduling, the agent's loop and run
(``agent_loop``, ``agent_run``), online evaluation (``evaluation``),
prompts, shared memory, fitting payloads into Temporal's limits
(``payload_fit``), redaction, what a ``TeamRun`` carries of its state when
it continues as new (``team_run_state``; the state itself is
``oma.core.schema.run_state``), forks (``fork``) and reuse (``reuse``)."""
