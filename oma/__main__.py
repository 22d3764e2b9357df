"""``oma`` and ``python -m oma``: the command line (``oma.cli``), in its own
process, or in a child of the warm forkserver with ``OMA_FORKSERVER=1``
(``oma.cli.forkserver``)."""

from oma.cli.forkserver import main

if __name__ == "__main__":
    main()
