"""``oma replay`` as a debugger: the state at any event (``--at``), a
step-through trace (``--trace``), breakpoints in the workflow code
(``--debug``, ``--break-at``, ``--ide``), and why a replay broke
(docs/debugging.md). Over ``oma.worker.replay_probe``."""
