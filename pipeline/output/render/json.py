"""One JSON object per evidence result, the public ``--format json`` contract:
``{"evidence", "params", "rows", "stats", "provenance"}``."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from decimal import Decimal
from typing import Any

import numpy as np
import orjson

from pipeline.evidence.result import EvidenceResult
from pipeline.output.render.text import iso_utc


def render_json(result: EvidenceResult) -> str:
    """The result as one indented JSON object: rows as a list of objects,
    datetimes as ISO-8601 UTC strings ending in ``Z``, NaN and infinities as null, except in
    ``stats``: there an infinite estimate (an odds ratio) is the string ``"inf"`` or ``"-inf"``,
    so that it is not mistaken for an undefined one (null, with a ``note`` saying why)."""
    document = {
        "evidence": result.evidence,
        "params": result.params,
        "rows": result.rows.to_dicts(),
        "stats": to_json_value(result.stats, infinity="text"),
        "provenance": result.provenance,
    }
    return orjson.dumps(to_json_value(document), option=orjson.OPT_INDENT_2).decode()


def to_json_value(value: Any, infinity: str = "null") -> Any:
    """``value`` as plain JSON types. Datetimes are converted here rather than by
    orjson so that zone-aware ones from other zones also end up in UTC with ``Z``.
    A result object with ``as_stat`` (pipeline.evidence.stats) is written as the dictionary it
    publishes; ``infinity="text"`` writes infinities as ``"inf"`` / ``"-inf"``, not null."""
    if hasattr(value, "as_stat"):
        return to_json_value(value.as_stat(), infinity)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: to_json_value(getattr(value, field.name), infinity) for field in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(key): to_json_value(item, infinity) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, np.ndarray)):
        return [to_json_value(item, infinity) for item in value]
    if isinstance(value, (dt.datetime, dt.date)):
        return iso_utc(value)
    if isinstance(value, dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, (float, np.floating)):
        if math.isinf(value) and infinity == "text":
            return "inf" if value > 0 else "-inf"
        return float(value) if math.isfinite(value) else None
    return value
