"""The run viewer of ``oma show``: what a run did, read from its histories
(``model``), drawn as text (``oma.cli.show``) or as one HTML page (``html``)."""
