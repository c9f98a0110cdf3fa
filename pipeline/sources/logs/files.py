"""Log and result files on disk: expansion of directories, gzip, file identity, time zones, a reader's records.

A log file is identified by a digest of its first line, not by its name or size: logrotate
renames ``vllm.log`` to ``vllm.log.1`` and compresses it, and a later copy of a live file is a
longer version of the same file, and all of them start with the same line. A vLLM record is
keyed by (file identity, line number): the key does not depend on the year or time zone we
read the times with, so re-reading a file with another ``--year`` or ``--timezone`` replaces
its records instead of adding them, and a rotated or gzipped twin or a longer version adds
nothing twice.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import BinaryIO
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import polars as pl

from pipeline.core.limits import PastLimit, inflated_past, limit
from pipeline.sources.errors import SourceError

_PROBE_BYTES = 256 * 1024


@dataclass(frozen=True)
class LogFile:
    path: Path
    mtime: datetime  # UTC; the time of the file's last line unless --year says otherwise
    # lines with bytes that are not UTF-8 in the last full pass of `lines` (a box: the dataclass is frozen)
    undecodable: list[int] = field(default_factory=lambda: [0], compare=False, repr=False)
    # its size when first opened: every read stops there, so a log still being appended to is read as it
    # was at the start, not until the reader catches the writer (a box: the dataclass is frozen)
    size_at_open: list[int | None] = field(default_factory=lambda: [None], compare=False, repr=False)

    @property
    def gzipped(self) -> bool:
        with open(self.path, "rb") as fh:
            return fh.read(2) == b"\x1f\x8b"

    def open_bytes(self) -> BinaryIO:
        """The file's bytes, gzip transparently: a gzip member that inflates past the limit's ratio
        (pipeline/core/limits.py) raises PastLimit as it is read, before its bytes are parsed."""
        raw = _UpTo(self.path, self.size_at_open[0])
        self.size_at_open[0] = raw.end
        if self.gzipped:
            return io.BufferedReader(_Inflating(raw), 1 << 20)
        return io.BufferedReader(raw, 1 << 20)

    def open_text(self):
        """Text lines, gzip transparently; undecodable bytes replaced, never fatal."""
        return io.TextIOWrapper(self.open_bytes(), encoding="utf-8", errors="replace", newline="")

    def lines(self) -> Iterator[str]:
        """The file's lines without their ends: LF, CR LF, a lone CR, and CR CR… LF (one end, not an
        empty line more: a line number must not depend on how many CRs a writer put before the LF).
        Bytes that are not UTF-8 at a line's end are dropped (a character cut by the writer is no text
        of a record), elsewhere read as U+FFFD; the lines that had any are counted in `undecodable`.
        A line longer than the line limit (pipeline/core/limits.py) comes back cut to it, the rest of it
        read past, never held."""
        self.undecodable[0] = 0
        for line in self._ended_lines():
            if "\ufffd" in line:
                self.undecodable[0] += 1
                line = line.rstrip("\ufffd")
            yield line

    def _ended_lines(self) -> Iterator[str]:
        most = limit().line_bytes
        with self.open_text() as fh:
            held: str | None = None  # a line ended by a lone CR, which CRs and then an LF may still continue
            crs = 0  # lone CRs after it
            while raw := fh.readline(most):
                if len(raw) == most and not raw.endswith(("\n", "\r")):  # (characters: at least as many bytes)
                    rest = ""
                    while (rest := fh.readline(most)) and not rest.endswith(("\n", "\r")):
                        pass
                    raw += rest[-2:] if rest.endswith("\r\n") else rest[-1:]  # the cut line keeps its end
                if held is not None:
                    if raw == "\r":
                        crs += 1
                        continue
                    yield held
                    if raw == "\r\n":  # CR… CR LF: the held line's end
                        held, crs = None, 0
                        continue
                    yield from [""] * crs
                    held, crs = None, 0
                if raw.endswith("\r"):
                    held = raw[:-1]
                else:
                    yield raw.rstrip("\r\n")
            if held is not None:
                yield held
                yield from [""] * crs

    def read_whole(self) -> str:
        """The file's text, for a reader that parses it whole; PastLimit past the limit of such a file."""
        most = limit().whole_file_bytes
        with self.open_text() as fh:
            text = fh.read(most + 1)
        if len(text) > most:
            raise PastLimit(f"longer than {most:,} characters, the most read whole (limit: pipeline/core/limits.py)")
        return text

    def head(self, size: int = _PROBE_BYTES) -> str:
        try:
            with self.open_text() as fh:
                return fh.read(size)
        except (OSError, EOFError) as exc:
            raise SourceError(f"{self.path}: cannot read ({exc})") from None

    def identity(self) -> str:
        """Hash of the first non-empty line: the same for a file, its rotated/gzipped twin and longer versions."""
        return self.identity_from(1) or "empty"

    def identity_from(self, number: int) -> str | None:
        """The identity a file starting at line `number` (1-based) of this one would have; None past the end."""
        for n, line in enumerate(self._ended_lines(), 1):  # as read before bytes at line ends were dropped
            if n >= number and line.strip():
                return line_hash(line)
        return None


class _UpTo(io.FileIO):
    """A file read up to `end` bytes (default: its size now), however much is appended meanwhile."""

    def __init__(self, path: Path, end: int | None = None) -> None:
        super().__init__(path, "rb")
        self.end = os.fstat(self.fileno()).st_size if end is None else end

    def readinto(self, buffer) -> int:
        left = self.end - self.tell()
        return super().readinto(memoryview(buffer).cast("B")[: max(left, 0)]) if left > 0 else 0

    def read(self, size: int | None = -1) -> bytes:
        left = max(self.end - self.tell(), 0)
        return super().read(left if size is None or size < 0 else min(size, left))

    def readall(self) -> bytes:
        return self.read(-1)


class _Inflating(io.RawIOBase):
    """A gzip stream that counts what it inflates against what it reads (`limits.inflated_past`)."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw, self._gz, self._inflated = raw, gzip.GzipFile(fileobj=raw, mode="rb"), 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self._gz.readinto(buffer)
        self._inflated += n
        if (why := inflated_past(self._inflated, self._raw.tell())) is not None:
            raise PastLimit(why)
        return n

    def close(self) -> None:
        self._gz.close()
        self._raw.close()
        super().close()


@dataclass
class LogRecords:
    """What a log kind's reader found in one file: its rows, keyed on the table's natural key."""

    rows: pl.DataFrame  # the rows of the kind's table, every column but run_id (added by the ingest)
    file_id: str  # the file's identity in `log_files` and in its quarantine rows' source id
    lines: int = 0
    unparsed: list[tuple[int, str, str]] = field(default_factory=list)  # (line or document, row key, text)
    first: datetime | None = None  # the time of its first and last records
    last: datetime | None = None


_OFFSET = re.compile(r"^(?:UTC|GMT)?([+-])(\d{1,2})(?::?(\d{2}))?$")


@dataclass(frozen=True)
class LogTimezone:
    """The zone a log's wall-clock times are in: an IANA name (daylight saving applies) or a fixed
    UTC offset. vLLM prints local times without a zone; the default is UTC."""

    name: str = "UTC"
    offset_minutes: int | None = 0  # None for an IANA zone

    @classmethod
    def parse(cls, text: str | None) -> LogTimezone:
        """`UTC`, `+02:00`, `-0530`, `UTC+3` or an IANA name such as `Europe/Berlin`; SourceError otherwise."""
        text = (text or "UTC").strip()
        if text.upper() in ("UTC", "Z", "GMT"):
            return cls()
        m = _OFFSET.match(text)
        if m:
            hours, minutes = int(m.group(2)), int(m.group(3) or 0)
            if hours > 14 or minutes > 59:
                raise SourceError(f"time zone {text!r}: a UTC offset is at most ±14:00")
            total = (hours * 60 + minutes) * (1 if m.group(1) == "+" else -1)
            return cls(f"{'+' if total >= 0 else '-'}{abs(total) // 60:02d}:{abs(total) % 60:02d}", total)
        try:
            ZoneInfo(text)
        except (ZoneInfoNotFoundError, ValueError):
            raise SourceError(
                f"unknown time zone {text!r}: give an IANA name (Europe/Berlin) or a UTC offset (+02:00)"
            ) from None
        return cls(text, None)

    def to_utc(self, local: pl.Series) -> pl.Series:
        """Naive local wall-clock times (Datetime "us") as UTC times. A time in the hour skipped when
        clocks go forward is read with the offset before the change; a repeated hour with the earlier one."""
        if self.offset_minutes is not None:
            return (local - timedelta(minutes=self.offset_minutes)).dt.replace_time_zone("UTC")
        zoned = local.dt.replace_time_zone(self.name, ambiguous="earliest", non_existent="null").dt.convert_time_zone(
            "UTC"
        )
        gap = zoned.is_null() & local.is_not_null()
        if gap.any():
            hour = timedelta(hours=1)
            before = (local - hour).dt.replace_time_zone(
                self.name, ambiguous="earliest", non_existent="null"
            ).dt.convert_time_zone("UTC") + hour
            zoned = zoned.zip_with(~gap, before)
        return zoned

    def local(self, moment: datetime) -> datetime:
        """A UTC moment (a file's modification time) as naive local wall-clock time."""
        if self.offset_minutes is not None:
            return (moment.astimezone(UTC) + timedelta(minutes=self.offset_minutes)).replace(tzinfo=None)
        return moment.astimezone(ZoneInfo(self.name)).replace(tzinfo=None)


def line_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=10).hexdigest()


def expand(paths: list[Path | str]) -> list[LogFile]:
    """Files named, and every regular non-hidden file of the directories named (sorted). A named path
    that is not a regular file (a FIFO would block the read, /dev/zero never ends) is a one-line error;
    `not_regular` names what the directories hold besides regular files."""
    files: list[LogFile] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise SourceError(f"{path}: no such file or directory")
        if not path.is_dir() and (why := _not_regular(path)) is not None:
            raise SourceError(f"{path}: {why}: not read")
        members = (
            sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
            if path.is_dir()
            else [path]
        )
        for member in members:
            mtime = datetime.fromtimestamp(member.stat().st_mtime, UTC)
            files.append(LogFile(member, mtime))
    if not files:
        raise SourceError(f"no files in {', '.join(str(p) for p in paths)}")
    return files


def not_regular(paths: list[Path | str]) -> list[tuple[Path, str]]:
    """The non-hidden entries of the directories named that are neither directories nor regular files
    (FIFOs, devices, sockets, dangling links), each with what it is: they are not read, and said so."""
    found = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for p in sorted(path.rglob("*")):
                if not p.name.startswith(".") and not p.is_dir() and (why := _not_regular(p)) is not None:
                    found.append((p, why))
    return found


def _not_regular(path: Path) -> str | None:
    from pipeline.sources.files import describe_mode

    try:
        mode = path.stat().st_mode
    except OSError as exc:
        return f"cannot be opened ({exc.strerror})"
    return None if stat.S_ISREG(mode) else f"not a regular file ({describe_mode(mode)})"
