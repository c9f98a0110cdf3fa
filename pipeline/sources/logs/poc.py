"""PoC validation results (docs/sources.md, PoC validation results): MLNode/vLLM JSON responses and
golden-vector reports.

Accepted shapes: one JSON object, a JSON array of them, JSON lines, an object with a
``results`` list, and the benchmark script's ``[validate] n_total=… n_mismatch=…
p_value=… fraud_detected=…`` lines. Each result's p-value is recomputed with the
one-sided exact binomial test P(X ≥ n_mismatch), X ~ Binomial(n_total, p_mismatch),
and the ``p_mismatch`` and cutoff used are stored beside it: the result's own
``stat_test`` when it carries one, else the defaults below (the chain's p_mismatch
with the MLNode's effective cutoff).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

import polars as pl

from pipeline.core.limits import loads_json
from pipeline.sources.logs.files import LogFile, LogRecords

DEFAULT_P_MISMATCH = 0.1
DEFAULT_CUTOFF = 0.01
DEFAULT_PARAMS = "default: chain p_mismatch 0.1, MLNode cutoff 0.01"
SCHEMA = pl.Schema(
    {
        "host": pl.String(),
        "result_key": pl.String(),
        "at": pl.Datetime("us", "UTC"),
        "request_id": pl.String(),
        "validator": pl.String(),
        "participant": pl.String(),
        "model": pl.String(),
        "event": pl.String(),
        "n_total": pl.Int64(),
        "n_mismatch": pl.Int64(),
        "reported_p_value": pl.Float64(),
        "reported_fraud": pl.Boolean(),
        "dist_threshold": pl.Float64(),
        "p_mismatch": pl.Float64(),
        "cutoff": pl.Float64(),
        "params_source": pl.String(),
        "p_value": pl.Float64(),
        "fraud": pl.Boolean(),
        "file": pl.String(),
    }
)
VALIDATE_LINE = re.compile(
    r"\[validate\] n_total=(?P<n_total>\d+) n_mismatch=(?P<n_mismatch>\d+) "
    r"p_value=(?P<p_value>\S+) fraud_detected=(?P<fraud>\w+)"
)


@dataclass
class ParsedPoc:
    results: list[dict] = field(default_factory=list)
    unparsed: list[tuple[int, str, str]] = field(default_factory=list)
    lines: int = 0


def binomial_p_value(n_mismatch: int, n_total: int, p_mismatch: float) -> float:
    """P(X ≥ n_mismatch) for X ~ Binomial(n_total, p_mismatch); 1.0 when there is nothing to test."""
    if n_total <= 0 or n_mismatch <= 0:
        return 1.0
    from scipy import stats as scipy_stats  # on first use: scipy takes seconds to import

    return float(scipy_stats.binom.sf(n_mismatch - 1, n_total, p_mismatch))


def _first(doc: dict, *names):
    for name in names:
        if doc.get(name) not in (None, ""):
            return doc[name]
    return None


def _time(value, fallback: datetime) -> datetime:
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value / 1000 if value > 1e11 else value, UTC)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
        except ValueError:
            pass
    return fallback


def _result(doc: dict, file: LogFile, host: str) -> dict | None:
    if "n_total" not in doc or "n_mismatch" not in doc:
        return None
    n_total, n_mismatch = int(doc["n_total"]), int(doc["n_mismatch"])
    given = doc.get("validation")
    validation = given if isinstance(given, dict) else {}
    stat = doc.get("stat_test") or validation.get("stat_test") or {}
    stat = stat if isinstance(stat, dict) else {}
    p_mismatch = _first(stat, "p_mismatch")
    cutoff = _first(stat, "fraud_threshold", "p_value_threshold")
    params = "result stat_test" if p_mismatch is not None else DEFAULT_PARAMS
    p_mismatch = float(p_mismatch) if p_mismatch is not None else DEFAULT_P_MISMATCH
    cutoff = float(cutoff) if cutoff is not None else DEFAULT_CUTOFF
    p_value = binomial_p_value(n_mismatch, n_total, p_mismatch)
    canonical = json.dumps(doc, sort_keys=True, default=str)
    reported_fraud = doc.get("fraud_detected")
    if isinstance(reported_fraud, str):
        reported_fraud = reported_fraud.lower() == "true"
    reported_p = doc.get("p_value")
    return {
        "host": host,
        "result_key": str(_first(doc, "request_id") or hashlib.blake2b(canonical.encode(), digest_size=10).hexdigest()),
        "at": _time(_first(doc, "timestamp", "at", "created_at", "time"), file.mtime),
        "request_id": _first(doc, "request_id"),
        "validator": str(_first(doc, "validator", "validator_participant_address", "validator_address") or host),
        "participant": _first(doc, "participant_address", "participant", "node_address"),
        "model": _first(doc, "model", "model_id"),
        "event": str(_first(doc, "poc_stage_start_block_height", "block_height", "event", "epoch") or ""),
        "n_total": n_total,
        "n_mismatch": n_mismatch,
        "reported_p_value": float(reported_p) if reported_p not in (None, "") else None,
        "reported_fraud": bool(reported_fraud) if reported_fraud is not None else None,
        "dist_threshold": float(stat["dist_threshold"])
        if stat.get("dist_threshold") is not None
        else (float(doc["dist_threshold"]) if doc.get("dist_threshold") is not None else None),
        "p_mismatch": p_mismatch,
        "cutoff": cutoff,
        "params_source": params,
        "p_value": p_value,
        "fraud": p_value < cutoff,
    }


def _documents(text: str):
    stripped = text.strip()
    try:
        doc = loads_json(stripped)
    except ValueError:
        for line in stripped.splitlines():
            if line.strip().startswith("{"):
                try:
                    yield loads_json(line)
                except ValueError:
                    yield line
        return
    if isinstance(doc, list):
        yield from doc
    elif isinstance(doc, dict) and isinstance(doc.get("results"), list):
        yield from (
            {**{k: v for k, v in doc.items() if k != "results"}, **r} for r in doc["results"] if isinstance(r, dict)
        )
    else:
        yield doc


def parse_poc(file: LogFile, host: str) -> ParsedPoc:
    out = ParsedPoc()
    text = file.read_whole()
    out.lines = text.count("\n") + 1
    if "[validate] n_total=" in text:
        for number, line in enumerate(text.splitlines(), 1):
            m = VALIDATE_LINE.search(line)
            if m:
                doc = {
                    "n_total": int(m["n_total"]),
                    "n_mismatch": int(m["n_mismatch"]),
                    "p_value": m["p_value"],
                    "fraud_detected": m["fraud"],
                    "report": f"{file.path.name}@{file.mtime.isoformat()}:{number}",
                }
                row = _result(doc, file, host)
                assert row is not None  # a [validate] line has both counts
                out.results.append(row)
        return out
    for i, doc in enumerate(_documents(text), 1):
        row = _result(doc, file, host) if isinstance(doc, dict) else None
        if row is None:
            out.unparsed.append((i, f"document {i}", str(doc)[:500]))
        else:
            out.results.append(row)
    return out


def is_poc_result(head: str) -> bool:
    """a file with `"n_total"` or `[validate] n_total=`"""
    return '"n_total"' in head or "[validate] n_total=" in head


def read_poc(file: LogFile, host: str) -> LogRecords:
    """The PoC validation results of a file of `host` (poc_results_t)."""
    parsed = parse_poc(file, host)
    rows = pl.DataFrame([{**r, "file": str(file.path)} for r in parsed.results], schema=SCHEMA)
    times = [r["at"] for r in parsed.results]
    first, last = (min(times), max(times)) if times else (None, None)
    return LogRecords(rows, file.identity(), parsed.lines, parsed.unparsed, first, last)
