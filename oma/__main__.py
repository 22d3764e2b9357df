"""``oma`` and ``python -m oma``: the command line (``oma.cli``), run in a
child of the warm forkserver when one answers (``oma._forkserver``)."""

from oma._forkserver import main

if __name__ == "__main__":
    main()
