"""Reading an input file that must be a regular file of bounded size.

Inputs named by a path (payload files, saved JSON responses, config files) may turn out to be something
else: a FIFO with no writer (a plain open would wait forever), a symlink to /dev/zero (a plain read would
never end), a directory or a device. They are opened without blocking and checked on the open
descriptor, so what is read is what was checked, and never more than the limit is read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class FileReadError(ValueError):
    """A file that cannot be used, with the reason (the caller names the file)."""


def read_regular_file(path: Path, limit: int) -> bytes:
    """The bytes of `path` if it is a regular file (after symlinks) of at most `limit` bytes."""
    fd, info = open_regular(path)
    try:
        if info.st_size > limit:
            raise FileReadError(f"larger than {limit:,} bytes ({info.st_size:,})")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(info.st_size + 1)  # one byte more than it holds: did it grow?
            if len(data) > info.st_size:
                data += f.read(limit + 1 - len(data))
    except OSError as exc:
        raise FileReadError(f"cannot read ({exc.strerror})") from None
    finally:
        os.close(fd)
    if len(data) > limit:  # it grew while being read
        raise FileReadError(f"larger than {limit:,} bytes")
    return data


def open_regular(path: Path) -> tuple[int, os.stat_result]:
    """A descriptor of `path` opened without blocking, and its stat, if it is a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise FileReadError(f"cannot open ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        raise FileReadError(f"cannot read ({exc.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise FileReadError(f"not a regular file ({describe_mode(info.st_mode)})")
    return fd, info


def describe_mode(mode: int) -> str:
    """What a file of this st_mode is, in words ("a FIFO", "a character device", …)."""
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "another kind"
