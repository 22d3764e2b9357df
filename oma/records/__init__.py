"""What Temporal keeps of past runs, read back: the one home of every reader
of runs, which the client, the CLI, ``oma acp``, the viewer and the worker's
activities that read runs (``read_fork_source``, ``read_task_outputs``, the
recorded turns ``llm_turn`` answers from) all call.

- ``history_files`` — an exported history (``temporal workflow show
  --output json``), or a directory of them, and the workflow id it records;
- ``executions`` — a run's executions (those of a workflow id, its
  latest, the first and last event of one, why its workflow task last
  failed) and the children each started, along a chain that continued as
  new;
- ``histories`` — a run's histories from the server: one execution's, its
  chain and its children's, fetched a few at a time;
- ``results`` — the result a ``TeamRun`` history's last event holds;
- ``aborts`` — the ``abort`` signal a run received, and its reason;
- ``outputs`` — outputs a ``TeamRun`` kept by reference, read back from
  its tasks' ``AgentRun`` results;
- ``fork_source`` — a run as a fork (or a run reusing its work) reads it,
  and the fork made of it.

Reading only: nothing here starts, signals or changes a run. The modules are
imported by path (``from oma.records.outputs import read_task_outputs``),
so that a process pays only for the readers it uses.
"""
