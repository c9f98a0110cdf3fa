"""Ctrl-C for work that Python's own KeyboardInterrupt may not reach: a DuckDB query runs in C++ with the
GIL released, and the exception a SIGINT handler raises can land where it is swallowed (a callback of
the engine) or between two fetches, so that the query runs on to its time limit.

Such work registers a callback while it runs (`on_interrupt`); the console script's SIGINT handler calls
`interrupt_all()` first, so that the work itself is stopped (DuckDB's `connection.interrupt()`), and the
work then ends in KeyboardInterrupt however the handler's own exception fared.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_callbacks: dict[int, Callable[[], None]] = {}
_lock = threading.Lock()


@contextmanager
def on_interrupt(callback: Callable[[], None]) -> Iterator[None]:
    """Within the block, a Ctrl-C calls `callback` (from the signal handler: it must only set flags or
    call thread-safe stops such as DuckDB's `interrupt()`)."""
    key = id(callback)
    with _lock:
        _callbacks[key] = callback
    try:
        yield
    finally:
        with _lock:
            _callbacks.pop(key, None)


def interrupt_all() -> None:
    """Called by the SIGINT handler: stop every registered piece of work."""
    for callback in list(_callbacks.values()):
        callback()
