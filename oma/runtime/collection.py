"""Python's cyclic garbage collector held off while a payload is decoded
(``oma.runtime.converter``), a run builds its state, or turns it into JSON
(its result, the state it continues as new with).

A run's first activation decodes its input and turns it into models: a 100,000-task run
builds some two million objects, and the collector, triggered every few
hundred allocations, walks every object the worker holds each time it
reaches its oldest generation: more than half the activation's CPU, against
the SDK's 2 s deadlock timer. Nothing built then is garbage, so collecting
waits until it is built. The collector decides nothing a workflow does:
holding it off changes no command (a replay is the same).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collection_held() -> Iterator[None]:
    """Hold the cyclic collector off inside (as it was after; reference
    counting still frees what is dropped)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
