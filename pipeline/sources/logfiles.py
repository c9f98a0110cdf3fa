"""Log and result files on disk: expansion of directories, gzip, file identity, kind detection.

A log file is identified by its first line, not by its name or size: logrotate
renames ``vllm.log`` to ``vllm.log.1`` and compresses it, and a later copy of a
live file is a longer version of the same file. Records are keyed by the hash of
their first line and its occurrence number within the file (sources.md §7.1:
lines carry no year, so the key must not depend on the year we infer), which
makes re-reading a file, its rotated or gzipped twin, or a longer version of it
add nothing twice.
"""

from __future__ import annotations

import gzip
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from pipeline.sources.base import SourceError

KINDS = ("vllm", "validator", "poc", "metrics")
_PROBE_BYTES = 256 * 1024
_SLOG = re.compile(r'(?m)^(?:time=\S+ level=\w+ msg=|\{"time":)')


@dataclass(frozen=True)
class LogFile:
    path: Path
    mtime: datetime  # UTC; the time of the file's last line unless --year says otherwise

    @property
    def gzipped(self) -> bool:
        with open(self.path, "rb") as fh:
            return fh.read(2) == b"\x1f\x8b"

    def open_text(self):
        """Text lines, gzip transparently; undecodable bytes replaced, never fatal."""
        if self.gzipped:
            return gzip.open(self.path, "rt", encoding="utf-8", errors="replace", newline="")
        return open(self.path, encoding="utf-8", errors="replace", newline="")

    def lines(self) -> Iterator[str]:
        with self.open_text() as fh:
            for line in fh:
                yield line.rstrip("\r\n")

    def head(self, size: int = _PROBE_BYTES) -> str:
        try:
            with self.open_text() as fh:
                return fh.read(size)
        except (OSError, EOFError) as exc:
            raise SourceError(f"{self.path}: cannot read ({exc})") from None

    def identity(self) -> str:
        """Hash of the first non-empty line: the same for a file, its rotated/gzipped twin and longer versions."""
        for line in self.lines():
            if line.strip():
                return line_hash(line)
        return "empty"


def line_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=10).hexdigest()


def expand(paths: list[Path | str]) -> list[LogFile]:
    """Files named, and every regular non-hidden file of the directories named (sorted)."""
    files: list[LogFile] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise SourceError(f"{path}: no such file or directory")
        members = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")) if path.is_dir() else [path]
        for member in members:
            mtime = datetime.fromtimestamp(member.stat().st_mtime, timezone.utc)
            files.append(LogFile(member, mtime))
    if not files:
        raise SourceError(f"no files in {', '.join(str(p) for p in paths)}")
    return files


def detect_kind(file: LogFile) -> str:
    """vllm, validator (dapi slog lines), poc (validation JSON or `[validate]` reports) or metrics (Prometheus text)."""
    head = file.head()
    if '"n_total"' in head or "[validate] n_total=" in head:
        return "poc"
    if re.search(r"(?m)^(?:# (?:TYPE|HELP) )?vllm:[a-z_]+", head):
        return "metrics"
    if "cosineSimValue" in head or _SLOG.search(head):
        return "validator"
    return "vllm"
