"""Paths typed by role (pipeline/core/roles.py), each checked once before any work.

Every path parameter of every command (and every path of the config file) has a role. `check_path`
does what the role needs, without blocking: an input that is a FIFO, a device, a socket or a
symlink loop is refused by name (it would block or never end), a file where a directory is needed
(or the reverse) is one line; `check_outputs` refuses an output that is, holds or lies inside an
input of the same command, the warehouse or a source the warehouse ingested (`OutputGuard`).

    check_path(Path("builds.toml"), Role.INPUT_FILE, "FILE")          # PathError when unusable
    check_outputs({"--out": Path("x")}, inputs=[store], warehouse=wh)  # PathError when it would overwrite one
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

from pipeline.core.roles import LAKE_DESCRIPTION, OUTPUT_MARKER, PathError, Role

_REPORT_ENTRY = re.compile(r"\.?epoch-\d+(\.(tmp|old)-\d+)?|index\.md|index\.html|index-charts")


def _named(what: str, path: Path) -> str:
    """How a message names the path: ``--out PATH`` for an option, ``PATH`` for an argument (`what` empty)."""
    return f"{what} {path}" if what else str(path)


def _stat(path: Path, what: str) -> os.stat_result | None:
    """The stat of what `path` names after symlinks; None when nothing is there."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PathError(f"{_named(what, path)}: a symlink loop") from None
        if exc.errno == errno.ENOTDIR:
            raise PathError(f"{_named(what, path)}: a part of the path is a file, not a directory") from None
        raise PathError(f"{_named(what, path)}: cannot be reached ({exc.strerror})") from None


def _kind(mode: int) -> str:
    from pipeline.core.files import describe_mode

    return "a regular file" if stat.S_ISREG(mode) else describe_mode(mode)


def check_path(path: Path, role: Role, what: str, noun: str | None = None) -> None:
    """PathError (one line, naming `what` and `path`) unless `path` can play `role`; never blocks.
    `noun` names a missing input ("config file")."""
    path = Path(path)
    info = _stat(path, what)
    mode = info.st_mode if info is not None else None
    if role in (Role.INPUT_FILE, Role.INPUT, Role.INPUT_DIR, Role.SOURCE):
        if mode is None:
            noun = noun or {Role.INPUT_FILE: "file", Role.INPUT: "file or directory"}.get(role, "directory")
            raise PathError(f"{_named(what, path)}: no such {noun}")
        if stat.S_ISDIR(mode):
            if role is Role.INPUT_FILE:
                raise PathError(f"{_named(what, path)}: not a regular file (a directory)")
            try:
                with os.scandir(path) as entries:
                    next(entries, None)
            except OSError as exc:
                raise PathError(f"{_named(what, path)}: cannot read the directory ({exc.strerror})") from None
            return
        if role in (Role.INPUT_DIR, Role.SOURCE):
            raise PathError(f"{_named(what, path)}: {_kind(mode)}, not a directory")
        _check_readable_file(path, what)
    elif role in (Role.WAREHOUSE_READ, Role.WAREHOUSE_WRITE):
        if mode is not None and not stat.S_ISREG(mode):
            raise PathError(f"{_named(what, path)}: {_kind(mode)}, not a warehouse file")
        _check_parent(path, what)
    elif role is Role.OUTPUT_FILE:
        if mode is not None and (stat.S_ISDIR(mode) or stat.S_ISSOCK(mode) or stat.S_ISBLK(mode)):
            raise PathError(f"{_named(what, path)}: is {_kind(mode)}; give a file name")
        _check_parent(path, what)
    elif role in (Role.OUTPUT_DIR, Role.LAKE_WRITE, Role.LAKE_READ):
        noun = "directory" if role is Role.OUTPUT_DIR else "lake directory"
        if mode is not None and not stat.S_ISDIR(mode):
            raise PathError(f"{_named(what, path)}: {_kind(mode)}, not a {noun}")
        if role is Role.OUTPUT_DIR and mode is not None and not _owned(path):
            raise PathError(
                f"{_named(what, path)}: holds files that are not an unchanged gonka-evidence bundle or reports "
                "(a directory gonka-evidence did not write); name a new or empty directory"
            )
        if role is Role.LAKE_WRITE and mode is not None and not _is_lake_or_empty(path):
            raise PathError(
                f"{_named(what, path)}: a directory that is not empty and is not a lake (no {LAKE_DESCRIPTION}); "
                "name a new or empty directory"
            )


def _check_readable_file(path: Path, what: str) -> None:
    """A regular file opened (without blocking, so a FIFO or a device cannot hang) and closed."""
    from pipeline.core.files import FileReadError, open_regular

    try:
        os.close(open_regular(path)[0])
    except FileReadError as exc:
        raise PathError(f"{_named(what, path)}: {exc}") from None


def _check_parent(path: Path, what: str) -> None:
    parent = path.parent
    info = _stat(parent, what)
    if info is None:
        raise PathError(f"{_named(what, path)}: no such directory {parent}")
    if not stat.S_ISDIR(info.st_mode):
        raise PathError(f"{_named(what, path)}: {parent} is {_kind(info.st_mode)}, not a directory")


def _owned(directory: Path) -> bool:
    """Whether an existing directory may be written into: empty, marked as the tool's output, a bundle
    this pipeline wrote, or a report directory (nothing but epoch-N reports, the run's index, staging)."""
    from pipeline.output.bundle import is_own_bundle

    try:
        with os.scandir(directory) as it:
            entries = list(it)
    except OSError:
        return False  # the writer's own error names the reason
    if not entries or any(e.name == OUTPUT_MARKER for e in entries):
        return True
    if all(_REPORT_ENTRY.fullmatch(e.name) and not e.is_symlink() for e in entries):
        return True
    return is_own_bundle(directory)


def claim_output_dir(directory: Path) -> None:
    """Create `directory` (and its parents) when missing and leave OUTPUT_MARKER in it, so that a later
    command knows it as this tool's own; callers check it in its role (`check_path`) first."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    marker = directory / OUTPUT_MARKER
    if not marker.is_file():
        marker.write_text(
            "written by gonka-evidence: this directory holds its output and may be rewritten by it\n", encoding="utf-8"
        )


def _is_lake_or_empty(directory: Path) -> bool:
    try:
        with os.scandir(directory) as it:
            names = {e.name for e in it}
    except OSError:
        return True  # the lake's own error names the reason
    return not names or LAKE_DESCRIPTION in names


def check_outputs(
    outputs: Mapping[str, Path],
    *,
    inputs: Iterable[Path] = (),
    warehouse: Path | None = None,
    warehouse_option: str | None = None,
) -> None:
    """PathError when an output is, holds or lies inside an input of the same command, the warehouse
    or a source the warehouse ingested (resolved, hard links included). `warehouse_option` names the
    output that is the warehouse itself (a command that writes it): that one is checked against the inputs."""
    from pipeline.output.guards.safety import OutputError, OutputGuard

    if not outputs:
        return
    inputs = [Path(p) for p in inputs]
    for what, target in outputs.items():
        protected = list(inputs)
        if warehouse is not None and what != warehouse_option:
            guard = OutputGuard.of(None, warehouse, protected)
            protected = [*guard.protected, *warehouse_sources(warehouse)]
        try:
            OutputGuard(tuple(Path(os.path.realpath(p)) for p in protected)).check(target, what)
        except OutputError as exc:
            raise PathError(str(exc)) from None


def warehouse_sources(warehouse: Path) -> list[Path]:
    """The file and directory sources an existing warehouse ingested (none when it cannot be read now:
    the command that opens it says why)."""
    import duckdb

    from pipeline.output.guards.safety import ingested_paths
    from pipeline.warehouse.database import is_duckdb_file

    try:
        if not stat.S_ISREG(os.stat(warehouse).st_mode) or not is_duckdb_file(warehouse):
            return []
        with duckdb.connect(str(warehouse), read_only=True) as con:
            return [Path(p) for p in ingested_paths(con)]
    except (OSError, duckdb.Error):
        return []
