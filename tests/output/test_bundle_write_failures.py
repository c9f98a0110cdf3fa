"""`bundle --out` where the file system refuses: a full disk, a read-only mount, a mount point, a name too
long, a file size limit. One line each (an EvidenceError, which the CLI prints as `error: …`), never an
OSError traceback, and nothing left beside the target (no `.NAME.*` staging, no `.NAME.old-*`)."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.evidence.window import EvidenceError
from pipeline.output.bundle import write_bundle

ROOT = Path(__file__).resolve().parents[2]
FILES = {"MANIFEST.json": b"{}\n", "tables/a.md": b"x" * 200_000}


@contextlib.contextmanager
def tmpfs(path: Path, *options: str) -> Iterator[Path]:
    """A small tmpfs at `path`; the test is skipped where mounting is not allowed (not root, a container)."""
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", ",".join(["size=64k", *options]), "tmpfs", str(path)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=False)


def _debris(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


def test_a_full_disk_is_one_line_and_leaves_nothing(tmp_path):
    with tmpfs(tmp_path / "vol") as vol:
        with pytest.raises(EvidenceError, match=r"cannot write the bundle \(No space left on device\)"):
            write_bundle(FILES, vol / "b")
        assert list(vol.iterdir()) == []


def test_a_read_only_mount_is_one_line(tmp_path):
    with tmpfs(tmp_path / "vol", "ro") as vol:
        with pytest.raises(EvidenceError, match=r"cannot write the bundle \(Read-only file system\)"):
            write_bundle(FILES, vol / "b")


def test_a_mount_point_is_refused_in_one_line_and_nothing_is_left_beside_it(tmp_path):
    """The fallback of the one-step swap moved the mount point aside into `.vol.old-*`, failed (EBUSY) and
    left that directory behind, with an OSError traceback."""
    with tmpfs(tmp_path / "vol", "size=1m") as vol:
        with pytest.raises(EvidenceError, match="a mount point, which cannot be replaced in one step"):
            write_bundle({"MANIFEST.json": b"{}\n"}, vol)
        assert _debris(tmp_path) == []


def test_a_name_too_long_is_one_line(tmp_path):
    with pytest.raises(EvidenceError, match=r"cannot write the bundle \(File name too long\)"):
        write_bundle(FILES, tmp_path / ("b" * 300))
    assert _debris(tmp_path) == []


def _limit_file_size() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))


@contextlib.contextmanager
def _file_size_limit(limit: int) -> Iterator[None]:
    """This process's writes past `limit` bytes fail with EFBIG (ulimit -f), as on a full disk; restored after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)


def test_the_command_says_one_line_when_a_file_of_the_bundle_cannot_be_written(tmp_path):
    """`bundle` in-process under a file size limit (the same command and limit as the test below): a larger
    write (its epoch report's, drawn through a temporary directory, first) fails with EFBIG and the command says
    one line (an EvidenceError, no OSError traceback), and leaves no bundle and nothing beside it."""
    from tests.factories import data_samples_warehouse
    from tests.helpers import cli_in

    warehouse = data_samples_warehouse(tmp_path / "w.duckdb")
    args = ["--epoch", "2", "-w", str(warehouse), "--out", str(tmp_path / "b")]
    with _file_size_limit(64 * 1024):
        done = cli_in(tmp_path, "bundle", "--host", "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx", *args)
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and line.endswith("(File too large)"), line
    assert not (tmp_path / "b").exists()
    assert _debris(tmp_path) == []


# a process of its own under `ulimit -f`; stands in the default tier:
# tests/output/test_bundle_write_failures.py::test_the_command_says_one_line_when_a_file_of_the_bundle_cannot_be_written
@pytest.mark.heavy
def test_the_cli_says_one_line_when_the_bundle_cannot_be_written(tmp_path):
    """No mount needed: a file size limit (ulimit -f) makes every larger write fail, as a full disk does."""
    from tests.factories import data_samples_warehouse

    warehouse = data_samples_warehouse(tmp_path / "w.duckdb")
    done = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "bundle", "--host", "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"]
        + ["--epoch", "2", "-w", str(warehouse), "--out", str(tmp_path / "b")],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        preexec_fn=_limit_file_size,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and line.endswith("(File too large)"), line
    assert not (tmp_path / "b").exists()
    assert _debris(tmp_path) == []
