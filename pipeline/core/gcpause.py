"""Pausing Python's cyclic garbage collector around hot loops.

The parsers allocate many short-lived objects that hold no reference cycles (reference counting
frees them); the collections their allocation count triggers find nothing and, measured, cost as
much as the work itself (vLLM log chunks, payload bodies).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
