"""Run an OMA worker: ``python worker.py``, the same as ``oma worker``
(``oma.worker``, where the worker lives; read its docstring for where it
connects and what it serves).

A real file, not a link to ``oma/worker``: Python puts a script's own
directory first on ``sys.path``, and a link resolved into ``oma/`` would put
``oma/`` there, where ``oma/acp`` shadows the ``acp`` SDK package.
"""

from __future__ import annotations

import asyncio

from oma.worker import main

if __name__ == "__main__":
    asyncio.run(main())
