"""The process's standard streams, made safe to write whatever the terminal, the locale or the reader.

`install()` (the console script, before anything prints):
- a closed stdin, stdout or stderr is reopened on /dev/null first, so that no file the command opens
  (the warehouse!) gets descriptor 0, 1 or 2; a closed stdout is reopened *read-only*, so that writing
  data to it fails (EBADF) instead of vanishing;
- text that the terminal's encoding cannot show (an en dash under ISO-8859-1 or ASCII) is escaped
  (``\\u2013``), never a UnicodeEncodeError;
- a write to stdout or stderr that fails raises `StandardStreamError` (a `BrokenPipeError` too when the
  reader went away), so that it is never taken for an error of the warehouse or of an output file.
"""

from __future__ import annotations

import contextlib
import errno
import io
import locale
import os
import sys
import typing

NAMES = {1: "standard output", 2: "standard error"}


class StandardStreamError(OSError):
    """A write to stdout failed: closed, full, or its reader went away (EPIPE)."""

    stream = "standard output"


class StandardStreamBrokenPipe(StandardStreamError, BrokenPipeError):
    """The reader of stdout (`| head`) has had enough."""


class _StreamRaw(io.FileIO):
    """The descriptor of a standard stream. Its write errors are StandardStreamErrors on stdout; on
    stderr (progress, summaries, the error line itself) they are dropped: there is nowhere left to say
    them, and losing a summary is no reason to fail the work."""

    def write(self, b) -> int:
        try:
            return super().write(b) or 0
        except OSError as exc:
            if self.fileno() == 2:
                return len(memoryview(b))
            kind = StandardStreamBrokenPipe if exc.errno == errno.EPIPE else StandardStreamError
            error = kind(exc.errno or errno.EIO, exc.strerror or str(exc))
            error.stream = NAMES.get(self.fileno(), "a standard stream")
            raise error from None


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _fill(fd: int) -> None:
    """Reopen the closed descriptor `fd` on /dev/null (stdout read-only: writing data fails, loudly)."""
    flags = os.O_WRONLY if fd == 2 else os.O_RDONLY
    new = os.open(os.devnull, flags)
    if new != fd:
        os.dup2(new, fd)
        os.close(new)


def _wrap(fd: int, old: typing.TextIO | None) -> io.TextIOWrapper:
    if old is not None:
        with contextlib.suppress(OSError, ValueError):
            old.flush()
    encoding = getattr(old, "encoding", None) or locale.getpreferredencoding(False)
    line_buffering = bool(getattr(old, "line_buffering", False))
    buffer = io.BufferedWriter(_StreamRaw(fd, "w", closefd=False))
    return io.TextIOWrapper(
        buffer, encoding=encoding, errors="backslashreplace", line_buffering=line_buffering, write_through=fd == 2
    )


def install() -> None:
    """Make the standard streams safe (see the module's docstring). Once, at the start of the process."""
    for fd in (0, 1, 2):
        if not _is_open(fd):
            _fill(fd)
    if sys.stdin is None:
        sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115 - the process's own
    sys.stdout = _wrap(1, sys.stdout)
    sys.stderr = _wrap(2, sys.stderr)


def quiet_stdout() -> None:
    """After a broken pipe: stdout goes to /dev/null, so that nothing flushed later fails again."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
