"""The pure logic of a run: the task graph (``task_graph``), the approval
gate (``approval_gate``), dispatch and scheduling, the agent's loop and run
(``agent_loop``, ``agent_run``), prompts, shared memory, fitting payloads
into Temporal's limits (``payload_fit``), redaction, and the state a
``TeamRun`` carries (``team_run_state``)."""
