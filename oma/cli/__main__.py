"""``python -m oma.cli``: the command line in this process (no forkserver)."""

from oma.cli.app import main

if __name__ == "__main__":
    main()
