"""The run viewer of ``oma show``: what a run did, read from its histories
(``model``), which of a many-task run's tasks its views show whole
(``paging``), drawn as one self-contained HTML page (``html``) with its time
scrubber (``scrubber``); ``oma.cli.show`` draws it on the terminal. It
imports the client and the core, never the command line."""
