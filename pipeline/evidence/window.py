"""The window an evidence table covers: all data, one epoch, or a half-open time range.

`--epoch N` means the escrows of epoch N. `--since/--until` is half-open
[since, until) and applies to the inference's `started_at` in answer-based
tables and to the verdict's `event_at` in vote-based ones; each table says
which. Both bounds are required together, so a window never silently runs to
"now" and a table stays reproducible.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from pipeline.core.errors import UserError
from pipeline.core.times import iso_utc


class EvidenceError(UserError):
    """A request for an evidence table that cannot be answered as asked; one-line message."""


@dataclass(frozen=True)
class Window:
    epoch: int | None = None
    since: dt.datetime | None = None  # UTC, inclusive
    until: dt.datetime | None = None  # UTC, exclusive

    @classmethod
    def parse(cls, epoch: int | str | None = None, since: Any = None, until: Any = None) -> Window:
        if epoch is not None and (since is not None or until is not None):
            raise EvidenceError("give either --epoch or --since/--until, not both")
        if (since is None) != (until is None):
            missing = "--until" if until is None else "--since"
            raise EvidenceError(f"{missing} is missing: a time window needs both --since and --until")
        if epoch is not None:
            return cls(epoch=_epoch(epoch))
        if since is None:
            return cls()
        start, end = _utc(since, "--since"), _utc(until, "--until")
        if start >= end:
            raise EvidenceError(f"--since {iso_utc(start)} is not before --until {iso_utc(end)}")
        return cls(since=start, until=end)

    @property
    def params(self) -> dict[str, Any]:
        """Query parameters of the evidence SQL: unset bounds are NULL and filter nothing."""
        return {"epoch": self.epoch, "since": self.since, "until": self.until}

    def as_dict(self) -> dict[str, Any]:
        """The window for provenance: ``{"epoch": N}``, ``{"since", "until"}`` or ``{}``."""
        if self.epoch is not None:
            return {"epoch": self.epoch}
        if self.since is not None:
            return {"since": self.since, "until": self.until}
        return {}

    def describe(self) -> str:
        if self.epoch is not None:
            return f"epoch {self.epoch}"
        if self.since is not None and self.until is not None:
            return f"[{iso_utc(self.since)}, {iso_utc(self.until)})"
        return "all data"


def _epoch(value: int | str) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    raise EvidenceError(f"--epoch {value!r} is not an epoch number")


def _utc(value: Any, option: str) -> dt.datetime:
    """A datetime in UTC from a datetime, a date or an ISO-8601 string; naive means UTC (the warehouse is
    UTC everywhere)."""
    if isinstance(value, dt.datetime):
        parsed = value
    elif isinstance(value, dt.date):
        parsed = dt.datetime(value.year, value.month, value.day)
    else:
        text = str(value).strip()
        try:
            parsed = dt.datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
        except ValueError:
            raise EvidenceError(f"{option} {value!r} is not an ISO-8601 time (e.g. 2026-10-25T23:06:00Z)") from None
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=dt.UTC)
    return parsed.astimezone(dt.UTC)
