"""Human-readable text for cells, statistics and provenance, shared by the
Markdown and terminal renderers so that both show the same numbers."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import polars as pl

from pipeline.core.times import iso_utc
from pipeline.evidence.result import Provenance

MISSING = "–"  # en dash: null / NaN / no estimate
RATE_SUFFIXES = ("_rate", "_share")
FRACTION_SUFFIXES = ("_usage",)  # a fraction of a capacity (KV cache usage): shown in percent, as rates are
ODDS_RATIO_LABELS = {"odds_ratio": "OR", "pooled_odds_ratio": "pooled OR"}


def format_number(value: float) -> str:
    """A float to 4 significant digits, fixed-point with thousands separators;
    scientific below 0.001 where fixed-point would show only zeros."""
    if math.isnan(value):
        return MISSING
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude < 1e-3:
        return f"{value:.3e}"
    integer_digits = math.floor(math.log10(magnitude)) + 1
    return f"{value:,.{max(0, 4 - integer_digits)}f}"


def format_p(value: float) -> str:
    """A p-value: 4 significant digits, scientific notation below 0.001."""
    if value is None or math.isnan(value):
        return MISSING
    if value == 0:
        return "< 1e-300"  # underflow of the chi-square tail, not a true zero
    if value < 1e-3:
        return f"{value:.2e}"
    return f"{value:.4g}"


def p_phrase(p: float, p_holm: float | None = None) -> str:
    """``p = 0.4857``, ``p < 1e-300`` for an underflow, with `` (Holm p = …)`` when adjusted."""
    text = f"p = {format_p(p)}" if p != 0 else f"p {format_p(p)}"
    return text + (f" (Holm p = {format_p(p_holm)})" if p_holm is not None else "")


def format_percent(value: float) -> str:
    return f"{value * 100:.2f}%"


def format_value(value: Any) -> str:
    """Any scalar or list as table text; null and NaN as an en dash."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, Decimal):
        return f"{int(value):,}" if value == value.to_integral_value() else format_number(float(value))
    if isinstance(value, float):
        return format_number(value)
    if isinstance(value, (dt.datetime, dt.date)):
        return iso_utc(value)
    if isinstance(value, (list, tuple)):
        return ", ".join(format_value(v) for v in value)
    return str(value)


def is_rate_column(name: str, dtype: pl.DataType) -> bool:
    return dtype.is_float() and (name.endswith(RATE_SUFFIXES) or name in ("rate", "share"))


def is_percent_column(name: str, dtype: pl.DataType) -> bool:
    """Shown in percent: every rate and share, and fractions of a capacity (one unit per quantity kind)."""
    return is_rate_column(name, dtype) or (dtype.is_float() and name.endswith(FRACTION_SUFFIXES))


def bootstrap_intervals(schema: pl.Schema) -> dict[str, tuple[str, str]]:
    """Which ``{x}_boot_low``/``{x}_boot_high`` columns hold the bootstrap interval of which column: the one
    whose last word is ``x`` (``rate_boot_*`` → ``acceptance_rate``) or whose initials are ``x``
    (``mal_boot_*`` → ``mean_acceptance_length``)."""
    names = schema.names()
    pairs: dict[str, tuple[str, str]] = {}
    for low in names:
        if not low.endswith("_boot_low") or (high := low.removesuffix("_low") + "_high") not in names:
            continue
        stem = low.removesuffix("_boot_low")
        for name in names:
            words = name.split("_")
            if name not in (low, high) and (words[-1] == stem or "".join(w[0] for w in words if w) == stem):
                pairs[name] = (low, high)
                break
    return pairs


def rate_intervals(schema: pl.Schema) -> dict[str, tuple[str, str]]:
    """Which ``*_low``/``*_high`` columns hold the interval of which rate column.

    ``invalid_rate`` pairs with ``invalid_rate_ci_*`` or ``invalid_ci_*``; the
    plain ``ci_low``/``ci_high`` of ``with_wilson`` pair with the one rate column
    left without its own interval (and with none if several are left).
    """
    names = set(schema.names())
    rates = [name for name, dtype in schema.items() if is_rate_column(name, dtype)]
    pairs: dict[str, tuple[str, str]] = {}
    for rate in rates:
        stem = rate.rsplit("_", 1)[0]
        for prefix in (f"{rate}_ci", f"{stem}_ci"):
            if f"{prefix}_low" in names and f"{prefix}_high" in names:
                pairs[rate] = (f"{prefix}_low", f"{prefix}_high")
                break
    unpaired = [rate for rate in rates if rate not in pairs]
    if len(unpaired) == 1 and {"ci_low", "ci_high"} <= names and ("ci_low", "ci_high") not in pairs.values():
        pairs[unpaired[0]] = ("ci_low", "ci_high")
    return pairs


def format_rate(rate: float | None, low: float | None = None, high: float | None = None) -> str:
    """``0.71%`` or, with an interval, ``0.71% (0.43–1.17%)``."""
    if rate is None or math.isnan(rate):
        return MISSING
    interval = format_interval(low, high)
    return format_percent(rate) + ("" if interval == MISSING else f" ({interval})")


def format_estimate(value: float | None, low: float | None = None, high: float | None = None) -> str:
    """``2.787 (2.698–2.881)``: a number that is not a share, with its interval."""
    if value is None or math.isnan(value):
        return MISSING
    if not _finite_pair(low, high):
        return format_number(value)
    return f"{format_number(value)} ({format_number(low)}–{format_number(high)})"  # type: ignore[arg-type]


def format_interval(low: float | None, high: float | None) -> str:
    """``35.81–36.31%``: an interval of a share on its own."""
    if not _finite_pair(low, high):
        return MISSING
    return f"{low * 100:.2f}–{format_percent(high)}"  # type: ignore[operator,arg-type]


def _finite_pair(low: float | None, high: float | None) -> bool:
    return low is not None and high is not None and not (math.isnan(low) or math.isnan(high))


def _interval_cell(rate: str, low: str, high: str) -> Callable[[dict[str, Any]], str]:
    return lambda row: format_rate(row[rate], row[low], row[high])


def _estimate_cell(column: str, low: str, high: str) -> Callable[[dict[str, Any]], str]:
    return lambda row: format_estimate(row[column], row[low], row[high])


def _bare_interval_cell(low: str, high: str) -> Callable[[dict[str, Any]], str]:
    return lambda row: format_interval(row[low], row[high])


def _rate_cell(rate: str) -> Callable[[dict[str, Any]], str]:
    return lambda row: format_rate(row[rate])


def _value_cell(column: str) -> Callable[[dict[str, Any]], str]:
    return lambda row: format_value(row[column])


def table_cells(rows: pl.DataFrame) -> tuple[list[str], list[bool], list[list[str]]]:
    """The header, which columns are numeric (right-aligned), and the cell text
    of ``rows``, with intervals folded into the cells of their estimates: a bootstrap interval where the table
    has one (it resamples whole units), else the rate's Wilson interval, which then keeps a column of its own
    (``ci_low–ci_high (Wilson 95%)``, the bootstrap columns' headers then saying ``(bootstrap 95%)``). Rates,
    shares and usage fractions in percent."""
    schema = rows.schema
    wilson = rate_intervals(schema)
    boot = bootstrap_intervals(schema)
    intervals = {**wilson, **boot}
    displaced = {wilson[name] for name in boot if name in wilson}  # Wilson pairs shown beside, not inside
    folded = {column for pair in (*intervals.values(), *displaced) for column in pair}
    header: list[str] = []
    numeric: list[bool] = []
    formatters: list[Callable[[dict[str, Any]], str]] = []
    for name in rows.columns:
        pair = next((p for p in displaced if p[0] == name), None)
        if pair is not None:  # the displaced interval where its low column stood, its method named
            header.append("–".join(pair) + " (Wilson 95%)")
            numeric.append(True)
            formatters.append(_bare_interval_cell(*pair))
            continue
        if name in folded:
            continue
        # where a table shows intervals of two methods, each header says which one its bracket holds
        header.append(name + (" (bootstrap 95%)" if displaced and name in boot else ""))
        numeric.append(schema[name].is_numeric())
        if name in intervals and is_percent_column(name, schema[name]):
            formatters.append(_interval_cell(name, *intervals[name]))
        elif name in intervals:
            formatters.append(_estimate_cell(name, *intervals[name]))
        elif is_percent_column(name, schema[name]):
            formatters.append(_rate_cell(name))
        else:
            formatters.append(_value_cell(name))
    body = [[fmt(row) for fmt in formatters] for row in rows.iter_rows(named=True)]
    return header, numeric, body


def stat_lines(stats: dict[str, Any]) -> list[str]:
    """One ``name: summary`` line per statistic; a group of results (one per build, per
    share) gives one ``name (key): summary`` line per member."""
    lines = []
    for name, value in stats.items():
        value = _as_stat(value)
        if (
            isinstance(value, dict)
            and value
            and all(isinstance(_as_stat(v), dict) for v in value.values())
            and not _describes_itself(value)
        ):
            lines += [f"{name} ({key}): {format_stat(key, item)}" for key, item in value.items()]
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            lines += [f"{name}: {format_stat(name, item)}" for item in value]
        else:
            lines.append(f"{name}: {format_stat(name, value)}")
    return lines


def format_stat(name: str, value: Any) -> str:
    value = _as_stat(value)
    if isinstance(value, (dict, list)) and not value:
        return "none"
    if isinstance(value, dict):
        if "test" in value:
            return _test_text(value)
        if "interval" in value:
            return _interval_text(value)
        if value.get("method") == "Holm":
            return (
                f"Holm-adjusted p-values (Holm p) over the {value['tests']} tests of this table "
                f"({value['controls']}): {', '.join(value['family'])}"
            )
        return ", ".join(_stat_group_parts(value))
    if _is_p_value(name) and isinstance(value, (int, float)):
        return format_p(float(value))
    return format_value(value)


def _as_stat(value: Any) -> Any:
    """A result object as the dictionary it publishes (``as_stat``), anything else as it is."""
    if hasattr(value, "as_stat"):
        return value.as_stat()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def _describes_itself(group: dict[str, Any]) -> bool:
    return any(key in group for key in ("test", "interval", "method"))


def _test_text(test: dict[str, Any]) -> str:
    """``Fisher exact, two-sided: p = 0.4857 (Holm p = 0.9714), OR 9.000`` and so on: the test's
    name, sidedness and correction first, then its numbers, then why something is missing."""
    head = ", ".join(str(test[k]) for k in ("test", "alternative") if test.get(k))
    if test.get("correction"):
        head += f", correction: {test['correction']}"
    parts = []
    if "statistic" in test and test["test"] != "Fisher–Freeman–Halton":
        df = f" ({test['df']} df)" if "df" in test else ""
        parts.append(f"χ² = {format_value(test['statistic'])}{df}")
    if "p_value" in test:
        parts.append(p_phrase(test["p_value"], test.get("p_holm")))
    for key, label in ODDS_RATIO_LABELS.items():
        if key in test:
            text = f"{label} {format_value(test[key])}"
            low, high = test.get("or_ci_low"), test.get("or_ci_high")
            if (
                isinstance(low, (int, float))
                and isinstance(high, (int, float))
                and not (math.isnan(low) or math.isnan(high))
            ):
                method = f", {test['or_ci_method']}" if test.get("or_ci_method") else ""
                text += (
                    f" ({test.get('confidence', 0.95) * 100:g}% CI {format_value(low)}–{format_value(high)}{method})"
                )
            parts.append(text)
    if "strata_used" in test:
        parts.append(f"strata: {test['strata_used']:,} used, {test.get('strata_dropped', 0):,} dropped")
    if "groups" in test:
        parts.append(f"{test['groups']} groups")
    if test.get("rows"):
        parts.append(f"rows: {' vs '.join(map(str, test['rows']))}")
    if test.get("epochs"):
        parts.append(f"epochs: {' vs '.join(map(str, test['epochs']))}")
    if test.get("p_value_method"):
        parts.append(f"p-value: {test['p_value_method']}")
    if test.get("null"):
        parts.append(f"null: {test['null']}")
    text = f"{head}: {', '.join(parts)}"
    return text + (f"; {test['note']}" if test.get("note") else "")


def _interval_text(interval: dict[str, Any]) -> str:
    """``Wilson score 95% interval of invalid / total (columns ci_low, ci_high)``, then its details."""
    text = f"{interval['interval']} {interval['level'] * 100:g}% interval of {interval['of']}"
    if interval.get("columns"):
        text += f" (columns {', '.join(interval['columns'])})"
    if interval.get("resamples"):
        text += f", {interval['resamples']:,} resamples of the {interval.get('unit', 'units')}, seed {interval['seed']}"
    return text + (f"; {interval['note']}" if interval.get("note") else "")


def _stat_group_parts(group: dict[str, Any]) -> Iterator[str]:
    """A result without a test name as readable parts; keys it does not know are shown as ``key = value``."""
    for key, value in group.items():
        if _is_p_value(key):
            yield p_phrase(value)
        elif key in ODDS_RATIO_LABELS:
            yield f"{ODDS_RATIO_LABELS[key]} {format_value(value)}"
        else:
            yield f"{key} = {format_value(value)}"


def _is_p_value(name: str) -> bool:
    return name in ("p", "p_value", "pvalue") or name.endswith("_p_value")


def window_text(window: dict[str, Any]) -> str:
    """``epoch 437``, ``[since, until)`` (half-open), or ``all data``."""
    parts = []
    if "epoch" in window:
        parts.append(f"epoch {window['epoch']}")
    if "since" in window or "until" in window:
        since = iso_utc(window["since"]) if window.get("since") is not None else "…"
        until = iso_utc(window["until"]) if window.get("until") is not None else "…"
        parts.append(f"[{since}, {until})")
    others = {key: value for key, value in window.items() if key not in ("epoch", "since", "until")}
    parts += [f"{key} {format_value(value)}" for key, value in others.items()]
    return ", ".join(parts) if parts else "all data"


def source_name(source: dict[str, Any]) -> str:
    """How a footer names a source: its label, else its id, an absolute path in the id cut to its
    last component (a footer names inputs, not where they lay on one machine)."""
    if source.get("label"):
        return str(source["label"])
    source_id = str(source.get("source_id"))
    prefix, sep, rest = source_id.partition(":")
    prefix, path = (f"{prefix}:", rest) if sep and not source_id.startswith("/") else ("", source_id)
    if path.startswith("/"):
        return prefix + (path.rstrip("/").rsplit("/", 1)[-1] or "/")
    return source_id


def short_digest(digest: str) -> str:
    """``sha256:`` and the first 16 hex digits: enough to tell copies apart in a footer (JSON has all 64)."""
    algorithm, _, hexdigits = digest.partition(":")
    return f"{algorithm}:{hexdigits[:16]}"


def escrow_finding_lines(findings: list[dict[str, Any]]) -> list[str]:
    """One line per escrow whose diff log is partial or whose copies disagree (footer and `doctor`)."""
    lines = []
    for f in findings:
        where = f"escrow {f['escrow_id']} (epoch {f['epoch_id']})"
        if not f["complete"]:
            lines.append(
                f"partial: {where}: no copy holds diff-log nonces {f['missing_ranges']} "
                f"({f['missing_nonces']:,} of {f['latest_nonce']:,}); its counts come from the rest of its log"
            )
        if f["conflicted"]:
            lines.append(
                f"conflicted: {where}: copies disagree on {f['forked_nonces']:,} diffs, "
                f"{f['conflicting_seals']:,} sealed rows and {f.get('conflicting_signatures') or 0:,} signatures; "
                "the replay uses each forked diff's version whose sha256 sorts first (query diff_forks)"
            )
    return lines


def provenance_lines(
    provenance: Provenance, quote_command: Callable[[str], str] = str, quote_text: Callable[[str], str] = str
) -> list[str]:
    """The footer lines that let a reader reproduce the table. ``quote_command`` formats the
    command, ``quote_text`` every other value from the data (labels, ids, kinds)."""
    lines = []
    for source in provenance.sources:
        copy_at = source.get("copy_at")
        copy_text = iso_utc(copy_at) if copy_at is not None else MISSING
        digest = source.get("input_digest")
        digest_text = f", input {quote_text(short_digest(digest))}" if digest else ""
        lines.append(
            f"source: {quote_text(source_name(source))} ({quote_text(str(source.get('source_kind')))}), "
            f"copy {copy_text}{digest_text}"
        )
    for failed in provenance.failed_runs:
        what = "failed" if failed.get("status") == "failed" else "did not finish"
        lines.append(
            f"warning: the latest ingest of {quote_text(source_name(failed))} (run "
            f"{quote_text(str(failed.get('run_id')))}) {what}; this table may hold part of what it read"
        )
    lines += [quote_text(line) for line in escrow_finding_lines(provenance.escrow_findings)]
    lines.append(f"window: {quote_text(window_text(provenance.window))}")
    lines.append(f"runs: {quote_text(', '.join(provenance.run_ids)) if provenance.run_ids else MISSING}")
    if provenance.quarantined_rows > 0:
        lines.append(f"quarantined rows: {provenance.quarantined_rows:,}")
    lines.append(f"pipeline: gonka-evidence {quote_text(provenance.pipeline_version)}")
    lines.append(f"command: {quote_command(provenance.command)}")
    return lines
