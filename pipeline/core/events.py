"""What a job tells the person who runs it goes to the caller's callbacks: the library never prints.

The facade (`pipeline.api`) installs the caller's `Listener` for the length of one call; library code
says a line of a job's log (`say`), a warning (`warn`), shows a table or a text block, or asks for a
progress callback. Without a listener nothing is said, and `verbose()` is false.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

# (table or phase name, rows done since the last call, rows added to the total)
Progress = Callable[[str, int, int], None]


def _ignore(*args: Any) -> None:
    return None


@dataclass(frozen=True)
class Listener:
    """The caller's callbacks. `line`: one line of a job's log (`run` prints it on stdout); `warning`:
    a warning (without the ``warning: `` prefix); `table`: a frame and its title, shown with
    `verbose`; `text`: a block of text (Markdown), shown with `verbose`; `progress`: a context
    manager giving a progress callback (or None) for one ingest."""

    line: Callable[[str], None] = _ignore
    warning: Callable[[str], None] = _ignore
    table: Callable[[Any, str | None], None] = _ignore
    text: Callable[[str], None] = _ignore
    progress: Callable[[], AbstractContextManager[Progress | None]] = nullcontext
    verbose: bool = False


SILENT = Listener()
_current: ContextVar[Listener] = ContextVar("pipeline_listener", default=SILENT)


@contextmanager
def listening(listener: Listener | None) -> Iterator[Listener]:
    """`listener` receives what the library says inside the block (None: nothing is said)."""
    token = _current.set(listener or SILENT)
    try:
        yield _current.get()
    finally:
        _current.reset(token)


def listener() -> Listener:
    return _current.get()


def say(message: str) -> None:
    _current.get().line(message)


def warn(message: str) -> None:
    _current.get().warning(message)


def verbose() -> bool:
    return _current.get().verbose


def progress() -> AbstractContextManager[Progress | None]:
    return _current.get().progress()
