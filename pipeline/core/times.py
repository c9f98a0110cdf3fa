"""How times are written everywhere (provenance, notes, reports, JSON): ISO-8601 in UTC ending in ``Z``."""

from __future__ import annotations

import datetime as dt


def iso_utc(value: dt.datetime | dt.date | str) -> str:
    """ISO-8601 in UTC ending in ``Z``. Naive datetimes are UTC already (the warehouse is UTC everywhere)."""
    if isinstance(value, str):
        return value
    if not isinstance(value, dt.datetime):
        return value.isoformat()
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    return value.isoformat() + "Z"
