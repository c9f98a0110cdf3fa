"""Validator (decentralized-api) logs: per-validation similarity scores (docs/sources.md, validator logs).

The dapi logs ``Cosine similarity validation result`` with ``cosineSimValue=…`` (the
custom logprob similarity, not a cosine) and, for answers that never reached the
comparison, ``Different length validation result`` / ``Different tokens validation
result`` / ``Invalid inference result`` — all of which become a value of 0 on chain.
Lines are Go slog records, in text (``time=… level=… msg="…" k=v``) or JSON form.
Optional attributes are taken when a build logs them: ``inferenceId``, ``escrowId``,
``executor``, ``threshold``, ``model``. Lines mentioning a score that cannot be read
are unparsed (reported), never fatal.

Rejection lines name why a validation failed without a score (docs/sources.md, validator logs):
``validation failed: <reason>`` (devshard prefixes ``devshard`` / ``devshardd`` on older builds),
``<check> failed: <reason>`` of the short-output checks (result ``rejected``, no value) and
``<check> would fail (log-only): <reason>`` (result ``log_only``: no verdict, the mean-distance check decides).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import polars as pl

from pipeline.sources.json_keys import loads_unique
from pipeline.sources.logs.files import LogFile, LogRecords, line_hash
from pipeline.sources.logs.vllm import ANSI

SLOG = re.compile(r'(?m)^(?:time=\S+ level=\w+ msg=|\{"time":)')
SCHEMA = pl.Schema(
    {
        "validator": pl.String(),
        "record_key": pl.String(),
        "at": pl.Datetime("us", "UTC"),
        "result": pl.String(),
        "value": pl.Float64(),
        "threshold": pl.Float64(),
        "escrow_id": pl.String(),
        "inference_id": pl.String(),
        "executor": pl.String(),
        "model": pl.String(),
        "reason": pl.String(),
        "file_id": pl.String(),
        "line": pl.Int64(),
    }
)
LOGFMT = re.compile(r'(\w[\w.]*)=("(?:[^"\\]|\\.)*"|\S*)')
RESULTS = {
    "Cosine similarity validation result": "similarity",
    "Different length validation result": "different_length",
    "Different tokens validation result": "different_tokens",
    "Invalid inference result": "invalid",
}
# Rejections without a score (gonka-ai/gonka common/validation/validation.go @72770819 and @d2343c05,
# common/validation/scoring.go @d2343c05, decentralized-api/internal/devshard/shared_runtime.go @dd8711ab):
# "[devshard |devshardd ]validation failed: <reason>" and the short-output checks' "<check> failed: <reason>" reject;
# "<check> would fail (log-only): <reason>" only logs. The reason is the text after the colon.
CHECKS = ("sampler-support check", "per-position ceiling check")
REJECTION = re.compile(
    r"^(?:(?:devshardd?) )?(?:validation failed: (?P<failed>.+)|(?P<check>"
    + "|".join(re.escape(c) for c in CHECKS)
    + r") (?P<how>failed|would fail \(log-only\)): (?P<reason>.+))$",
    re.S,
)
REJECTION_WORDS = ("validation failed: ", " check failed: ", "would fail (log-only): ")
ALIASES = {
    "inference_id": ("inferenceId", "inference_id", "inferenceID"),
    "escrow_id": ("escrowId", "escrow_id", "escrowID", "escrow"),
    "executor": ("executor", "executorAddress", "executor_address"),
    "threshold": ("threshold", "validationThreshold", "validation_threshold"),
    "model": ("model", "modelId", "model_id"),
}


@dataclass
class ParsedScores:
    scores: list[dict] = field(default_factory=list)
    unparsed: list[tuple[int, str, str]] = field(default_factory=list)
    lines: int = 0
    first_at: datetime | None = None
    last_at: datetime | None = None


def _attrs(line: str) -> dict | None:
    line = line.strip()
    if line.startswith("{"):
        try:
            doc = loads_unique(line)
        except ValueError:  # not JSON, or a key given twice with two values (DuplicateKey): unparsed
            return None
        return doc if isinstance(doc, dict) else None
    attrs: dict = {}
    for key, value in LOGFMT.findall(line):
        value = json.loads(value) if value.startswith('"') else value
        if attrs.get(key, value) != value:  # logfmt's key given twice with two values: unparsed
            return None
        attrs[key] = value
    return attrs


def _rejection(msg: object) -> tuple[str, str] | None:
    """(result, reason) of a rejection or log-only check line, else None."""
    m = REJECTION.match(msg) if isinstance(msg, str) else None
    if m is None:
        return None
    if m["failed"] is not None:
        return "rejected", m["failed"]
    return ("rejected" if m["how"] == "failed" else "log_only"), f"{m['check']}: {m['reason']}"


def _read(attrs: dict | None, rejection: tuple[str, str] | None) -> tuple[str, float | None, str | None] | None:
    """(result, value, reason) of a line, None when it cannot be read. A rejection has no value; the mainnet
    path's ``Invalid inference result`` names its reason in ``reason``."""
    if rejection is not None:
        return rejection[0], None, rejection[1]
    msg = (attrs or {}).get("msg")
    result = RESULTS.get(msg) if isinstance(msg, str) else None
    if attrs is None or result is None:
        return None
    if result != "similarity":
        reason = attrs.get("reason") if result == "invalid" else None
        return result, 0.0, str(reason) if reason not in (None, "") else None
    try:
        return result, float(attrs["cosineSimValue"]), None
    except (KeyError, TypeError, ValueError):
        return None


def _time(value) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def parse_validator_log(file: LogFile, validator: str) -> ParsedScores:
    out = ParsedScores()
    seen: dict[str, int] = {}
    for number, raw in enumerate(file.lines(), 1):
        out.lines = number
        scored = "validation result" in raw or "Invalid inference result" in raw or "cosineSimValue" in raw
        if not scored and not any(w in raw for w in REJECTION_WORDS):
            continue
        line = ANSI.sub("", raw) if "\x1b" in raw else raw
        h = line_hash(line)
        n = seen.get(h, 0)
        seen[h] = n + 1
        key = f"{h}:{n}"
        attrs = _attrs(line)
        msg = (attrs or {}).get("msg")
        rejection = _rejection(msg)
        if rejection is None and not scored:
            continue  # another message that only quotes a rejection's words
        read = _read(attrs, rejection)
        at = _time((attrs or {}).get("time"))
        if attrs is None or read is None or at is None:
            out.unparsed.append((number, key, line[:500]))
            continue
        result, value, reason = read
        row: dict[str, Any] = {
            "validator": validator,
            "record_key": key,
            "at": at,
            "value": value,
            "result": result,
            "reason": reason,
            "line": number,
        }
        for column, names in ALIASES.items():
            row[column] = next((str(attrs[n]) for n in names if attrs.get(n) not in (None, "")), None)
        try:
            row["threshold"] = float(row["threshold"]) if row["threshold"] is not None else None
        except ValueError:
            row["threshold"] = None
        out.scores.append(row)
        out.first_at = min(out.first_at or at, at)
        out.last_at = max(out.last_at or at, at)
    return out


def is_validator_log(head: str) -> bool:
    """a file with `cosineSimValue` or Go slog lines"""
    return "cosineSimValue" in head or SLOG.search(head) is not None


def read_validator_log(file: LogFile, host: str) -> LogRecords:
    """The similarity scores of a validator log of `host` (log_validation_scores)."""
    parsed = parse_validator_log(file, host)
    file_id = file.identity()
    rows = pl.DataFrame([{**r, "file_id": file_id} for r in parsed.scores], schema=SCHEMA)
    return LogRecords(rows, file_id, parsed.lines, parsed.unparsed, parsed.first_at, parsed.last_at)
