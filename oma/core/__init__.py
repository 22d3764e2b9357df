"""The core of OMA on Temporal: pydantic models and pure logic.

No I/O, no Temporal client, no provider SDK: the workflows run this code
(deterministically, inside the Temporal sandbox) and so do the activities and
the entry points. It imports nothing from ``oma.records``,
``oma.workflows``, ``oma.activities`` or the layers above them (``make lint`` checks it).

Three packages, each over the next (their own import contract in
``pyproject.toml``):

- ``rules``: the pure logic of a run (the task graph, the approval gate,
  dispatch and scheduling, the agent's loop and run, online evaluation,
  prompts, shared memory, fitting payloads, redaction, what a ``TeamRun``
  carries of its state when it continues as new, forks and reuse);
- ``contracts``: what workflows and activities pass each other (the inputs
  and outputs of ``llm_turn``, ``process_run``, ``acp_prompt``, the run
  hooks; budgets granted to an ``AgentRun``; the ports of an agent run;
  search attributes; child workflow ids);
- ``schema``: what a user writes and reads (the run input, agents, teams,
  tasks, plans, messages, tools, MCP servers, approvals, evaluation, results,
  the state a ``TeamRun`` carries, events, usage and prices, the errors) and
  the checks of it (sizes, shapes, the task graph).
"""
