"""``oma`` and ``python -m oma``: the command line (``oma.cli``), in its own
process, or in a child of the warm forkserver with ``OMA_FORKSERVER=1``
(``oma.cli.forkserver``, imported only then)."""

import os


def main() -> None:
    """The ``oma`` console script."""
    if os.environ.get("OMA_FORKSERVER") == "1":
        from oma.cli.forkserver import main as forked

        forked()  # never returns
    from oma.cli.app import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
