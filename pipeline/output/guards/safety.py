"""Outputs never destroy inputs: an output path that is the warehouse, a source or inside one is
refused, and a file output is written whole (beside its target, then renamed) or not at all.

    guard = OutputGuard.of(con, warehouse_path)     # the warehouse and every source it ingested
    guard.check(Path("out.csv"), "--output")         # OutputError when it would touch one of them
    with output_file(Path("out.csv")) as sink: ...   # bytes; renamed into place when the block ends
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import duckdb

from pipeline.core.errors import UserError

# The files DuckDB keeps beside a database: its write-ahead log and its spill directory.
WAREHOUSE_COMPANIONS = (".wal", ".tmp")


class OutputError(UserError):
    """An output that cannot be written where it was asked; one-line message."""


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


@dataclass(frozen=True)
class OutputGuard:
    """The paths no output may be, or be inside of (each resolved: symlinks cannot hide them)."""

    protected: tuple[Path, ...]

    @classmethod
    def of(cls, con: duckdb.DuckDBPyConnection | None, warehouse: Path, extra: Iterable[Path] = ()) -> OutputGuard:
        """The warehouse (with its companions) and every file or directory source ingested into it."""
        paths = [Path(warehouse), *(Path(f"{warehouse}{suffix}") for suffix in WAREHOUSE_COMPANIONS), *extra]
        if con is not None:
            paths += [Path(p) for p in ingested_paths(con)]
        return cls(tuple(dict.fromkeys(_real(p) for p in paths)))

    def check(self, target: Path, what: str) -> None:
        """OutputError when `target` is a protected path, inside one, or holds one (a directory output
        that would be replaced); also when it is another name (a hard link) of a protected file."""
        real = _real(target)
        for path in self.protected:
            if real == path or path in real.parents or real in path.parents or _same_file(real, path):
                raise OutputError(
                    f"{what} {target}: would overwrite the warehouse or a source ({path}); write it somewhere else"
                )


def _same_file(a: Path, b: Path) -> bool:
    """Whether `a` is `b`, or another name (a hard link) of `b` or of a file inside the directory `b`."""
    try:
        info = os.stat(a)
        if os.path.samefile(a, b):
            return True
    except OSError:
        return False
    if not stat.S_ISREG(info.st_mode) or info.st_nlink < 2 or not b.is_dir():
        return False
    return (info.st_dev, info.st_ino) in _inodes_below(b)


# How many entries of a protected directory are looked at for a hard link of an output: a store holds a
# few dozen files; a directory of millions is not walked whole.
_WALK_LIMIT = 100_000


def _inodes_below(directory: Path) -> set[tuple[int, int]]:
    found: set[tuple[int, int]] = set()
    seen = 0
    for root, _dirs, names in os.walk(directory):
        for name in names:
            seen += 1
            if seen > _WALK_LIMIT:
                return found
            with contextlib.suppress(OSError):
                info = os.stat(os.path.join(root, name), follow_symlinks=False)
                found.add((info.st_dev, info.st_ino))
    return found


def ingested_paths(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The paths of the file and directory sources the warehouse ingested (URLs are not paths)."""
    try:
        rows = con.execute(
            "SELECT DISTINCT source_display FROM ingest_runs "
            "WHERE source_display LIKE '/%' AND source_kind <> 'postgres'"
        ).fetchall()
    except duckdb.Error:  # a warehouse without runs yet
        return []
    return [display for (display,) in rows if display]


@contextlib.contextmanager
def output_file(target: Path) -> Iterator[BinaryIO]:
    """A binary sink for `target`. A regular file (or a new one) is written beside it and renamed into
    place when the block ends, so a failure leaves the old file; a device or a pipe is written directly
    (a named pipe without a reader is an error, not a wait). Write errors become one-line OutputErrors."""
    target = Path(target)
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise OutputError(f"{target}: cannot write ({exc.strerror})") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise OutputError(f"{target}: is a directory; give a file name")
    try:
        if mode is not None and not stat.S_ISREG(mode):
            with _open_special(target, mode) as sink:
                yield sink
            return
        fd, staging = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as sink:
                yield sink
            os.chmod(staging, stat.S_IMODE(mode) if mode is not None else 0o666 & ~_umask())
            os.replace(staging, target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(staging)
            raise
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            raise
        raise OutputError(f"{target}: cannot write ({exc.strerror or exc})") from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _open_special(target: Path, mode: int) -> contextlib.AbstractContextManager[BinaryIO]:
    """A device or a pipe, opened for writing without waiting for a reader."""
    if stat.S_ISFIFO(mode):
        try:
            fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                raise OutputError(f"{target}: a named pipe that nothing reads") from None
            raise
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "wb")
    return open(target, "wb")  # noqa: SIM115 - the caller's `with` closes it
