"""The files of a source directory: which can be opened as regular files, and copying one.

Reading one input file without blocking and within a bound is `pipeline.core.files` (re-exported here).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pipeline.core.files import FileReadError, describe_mode, open_regular, read_regular_file

__all__ = [
    "FileReadError",
    "copy_regular_file",
    "describe_mode",
    "open_regular",
    "read_regular_file",
    "unusable_reason",
]


def unusable_reason(path: Path, root: Path) -> str | None:
    """Why `path` cannot be opened as a regular file of the directory `root` (None: it can): it is not a
    regular file (a FIFO would block an open, a device never ends), or it is a symlink that leaves `root`."""
    try:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            target = Path(path).resolve()
            if not target.is_relative_to(Path(root).resolve()):
                return f"a symlink leaving the store (to {target})"
            info = os.stat(target)
    except OSError as exc:
        return f"cannot be opened ({exc.strerror})"
    except RuntimeError:  # pathlib's word for a symlink that leads back to itself
        return "a symlink loop"
    if not stat.S_ISREG(info.st_mode):
        return f"not a regular file ({describe_mode(info.st_mode)})"
    return None


def copy_regular_file(src: Path, dst: Path) -> None:
    """Copy a regular file, never more than the size it had when opened (it may not grow under us);
    opened without blocking and checked on the descriptor, like `read_regular_file`."""
    fd, info = open_regular(src)
    try:
        left = info.st_size
        with os.fdopen(fd, "rb", closefd=False) as f, open(dst, "wb") as out:
            while left > 0 and (block := f.read(min(left, 1 << 20))):
                out.write(block)
                left -= len(block)
    except OSError as exc:
        raise FileReadError(f"cannot copy ({exc.strerror})") from None
    finally:
        os.close(fd)
