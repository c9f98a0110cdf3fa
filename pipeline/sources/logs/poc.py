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
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

import polars as pl

from pipeline.sources.json_keys import DuplicateKey, loads_unique
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


INT64_MAX = (1 << 63) - 1


class BadResult(ValueError):
    """A result whose numbers are out of range: quarantined with the reason, never stored changed."""


def _count(doc: dict, name: str) -> int:
    """A count of the result: a whole number in [0, 2^63) (as a JSON integer, integral float or digits)."""
    value = doc[name]
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise BadResult(f"{name} is not a count ({value!r:.60})")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise BadResult(f"{name} is not a whole number ({value!r})")
    try:
        number = int(value)
    except ValueError:  # not digits, or more digits than Python converts
        raise BadResult(f"{name} is not a count ({value!r:.60})") from None
    if not 0 <= number <= INT64_MAX:
        raise BadResult(f"{name} {str(number)[:40]} is out of range (0 to 2^63-1)")
    return number


def _probability(value, name: str, open_interval: bool = False) -> float:
    """A probability given by the result: finite, in [0, 1] (in (0, 1) where `open_interval`)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise BadResult(f"{name} is not a number ({value!r:.60})") from None
    if not math.isfinite(number) or not (0 < number < 1 if open_interval else 0 <= number <= 1):
        raise BadResult(f"{name} {value!r:.60} is out of range ({'(0, 1)' if open_interval else '[0, 1]'})")
    return number


def _finite(value, name: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise BadResult(f"{name} is not a number ({value!r:.60})") from None
    if not math.isfinite(number):
        raise BadResult(f"{name} {value!r:.60} is not finite")
    return number


def _time(value, fallback: datetime) -> datetime:
    if isinstance(value, bool):
        raise BadResult(f"time {value!r} is not a time")
    if isinstance(value, (int, float)):
        try:
            return datetime.fromtimestamp(value / 1000 if value > 1e11 else value, UTC)
        except (OverflowError, OSError, ValueError):
            raise BadResult(f"time {value!r:.60} is out of range") from None
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
    n_total, n_mismatch = _count(doc, "n_total"), _count(doc, "n_mismatch")
    if n_mismatch > n_total:
        raise BadResult(f"n_mismatch {n_mismatch} is more than n_total {n_total}")
    given = doc.get("validation")
    validation = given if isinstance(given, dict) else {}
    stat = doc.get("stat_test") or validation.get("stat_test") or {}
    stat = stat if isinstance(stat, dict) else {}
    p_mismatch = _first(stat, "p_mismatch")
    cutoff = _first(stat, "fraud_threshold", "p_value_threshold")
    params = "result stat_test" if p_mismatch is not None else DEFAULT_PARAMS
    p_mismatch = (
        _probability(p_mismatch, "p_mismatch", open_interval=True) if p_mismatch is not None else DEFAULT_P_MISMATCH
    )
    cutoff = _probability(cutoff, "cutoff") if cutoff is not None else DEFAULT_CUTOFF
    p_value = binomial_p_value(n_mismatch, n_total, p_mismatch)
    canonical = json.dumps(doc, sort_keys=True, default=str)
    reported_fraud = doc.get("fraud_detected")
    if isinstance(reported_fraud, str):
        reported_fraud = reported_fraud.lower() == "true"
    reported_p = doc.get("p_value")
    reported_p = _probability(reported_p, "p_value") if reported_p not in (None, "") else None
    dist = stat.get("dist_threshold") if stat.get("dist_threshold") is not None else doc.get("dist_threshold")
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
        "reported_p_value": reported_p,
        "reported_fraud": bool(reported_fraud) if reported_fraud is not None else None,
        "dist_threshold": _finite(dist, "dist_threshold") if dist is not None else None,
        "p_mismatch": p_mismatch,
        "cutoff": cutoff,
        "params_source": params,
        "p_value": p_value,
        "fraud": p_value < cutoff,
    }


def _documents(text: str):
    stripped = text.strip()
    try:
        doc = loads_unique(stripped)
    except DuplicateKey as exc:  # one document: quarantined whole with the reason
        yield f"{exc}: {stripped[:300]}"
        return
    except ValueError:
        for line in stripped.splitlines():
            if line.strip().startswith("{"):
                try:
                    yield loads_unique(line)
                except DuplicateKey as exc:
                    yield f"{exc}: {line[:300]}"
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
                try:
                    row = _result(doc, file, host)
                except BadResult as exc:
                    out.unparsed.append((number, f"line {number}", f"{exc}: {line[:400]}"))
                    continue
                assert row is not None  # a [validate] line has both counts
                out.results.append(row)
        return out
    for i, doc in enumerate(_documents(text), 1):
        try:
            row = _result(doc, file, host) if isinstance(doc, dict) else None
        except BadResult as exc:
            out.unparsed.append((i, f"document {i}", f"{exc}: {str(doc)[:400]}"))
            continue
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
