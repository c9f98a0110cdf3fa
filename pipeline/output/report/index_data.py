"""The index of every closed epoch, its data: one headline per epoch report (stored with the report), and
the rows and findings of the index built from them (pipeline/output/report/index.py writes it)."""

from __future__ import annotations

from typing import Any

import polars as pl

from pipeline.evidence.stats import POISSON, poisson_rate_interval
from pipeline.evidence.tables.tracker import SHARES as TRACKER_PARTS
from pipeline.output.render.text import format_number, format_rate
from pipeline.output.report.findings import interval_text, pooled, share
from pipeline.output.report.model import EpochReport

HOURS_PER_DAY = 24


def headline(report: EpochReport) -> dict[str, Any]:
    """The epoch's headline numbers, JSON-ready, from the report's sections (None where a section was skipped)."""
    results = {s.key: s.result for s in report.sections if s.result is not None}
    out: dict[str, Any] = {
        "epoch": report.epoch,
        "closed_at": report.closure.closed_at.isoformat() if report.closure.closed_at else None,
        "findings": [{"label": f.label, "text": f.text} for f in report.findings],
        "rates": [],
        "verdicts": [],
        "acceptance": [],
        "stability": None,
        "tracker": None,
        "builds": [],
    }
    if (peer := results.get("peer-invalidation")) is not None:
        for group, row in pooled(peer).items():
            out["rates"].append(
                {
                    "group": group,
                    "answers": row["answers"],
                    "bad": row["challenged_or_invalidated"],
                    "rate": row["rate"],
                    "low": row["ci_low"],
                    "high": row["ci_high"],
                }
            )
    if (votes := results.get("votes-by-build")) is not None:
        for row in votes.rows.filter(pl.col("total") > 0).iter_rows(named=True):
            out["verdicts"].append(
                {"build": row["build"], "kind": row["kind"], "total": row["total"], "invalid": row["invalid"]}
            )
    if (acc := results.get("acceptance")) is not None:
        for row in acc.rows.iter_rows(named=True):
            if row["mean_acceptance_length"] is not None and row["drafted"]:
                out["acceptance"].append(
                    {
                        "build": row["build"],
                        "mal": row["mean_acceptance_length"],
                        "low": row["mal_boot_low"],
                        "high": row["mal_boot_high"],
                        "drafts": row["drafts"],
                    }
                )
    if (stab := results.get("stability")) is not None and stab.rows.height:
        hours = float(stab.rows["hours_observed"].sum())
        deaths, ooms = int(stab.rows["engine_deaths"].sum()), int(stab.rows["ooms"].sum())
        out["stability"] = {
            "hours": hours,
            "deaths": deaths,
            "ooms": ooms,
            "deaths_per_24h": deaths / hours * HOURS_PER_DAY if hours else None,
            "ooms_per_24h": ooms / hours * HOURS_PER_DAY if hours else None,
        }
        # per build, as the stability table attributes them: the chart marks each in its build's band
        out["stability_by_build"] = [
            {"build": r["build"], "hours": float(r["hours_observed"]), "deaths": r["engine_deaths"], "ooms": r["ooms"]}
            for r in stab.rows.iter_rows(named=True)
        ]
    if (tracker := results.get("tracker")) is not None and "participant" in tracker.rows.columns:
        mine = tracker.rows.filter((pl.col("participant") == report.host) & (pl.col("epoch") == report.epoch))
        if mine.height:
            row = mine.row(0, named=True)
            out["tracker"] = {k: row.get(k) for k in TRACKER_SHARES}
            # each share's count, denominator and Wilson interval, as the tracker table reports them
            out["tracker_counts"] = {
                k: {
                    "count": row.get(part),
                    "of": row.get(whole),
                    "low": _finite(row.get(f"{part}_ci_low")),
                    "high": _finite(row.get(f"{part}_ci_high")),
                }
                for k, (part, whole) in TRACKER_PARTS.items()
            }
    # the builds that ran in the epoch: those with verdicts, acceptance windows or hours of logs in it
    active = [v["build"] for v in out["verdicts"]] + [a["build"] for a in out["acceptance"]]
    if stab is not None:
        active += stab.rows.filter(pl.col("hours_observed") > 0)["build"].to_list()
    out["builds"] = sorted({b for b in active if b and b != "unattributed"})
    # where each build was in effect inside the epoch (fractions of its span): the bands' boundaries
    out["segments"] = [dict(seg) for seg in report.build_segments]
    return out


TRACKER_SHARES = tuple(TRACKER_PARTS)


def _finite(value: float | None) -> float | None:
    return None if value is None or value != value else value


def _num(value: float | None) -> str:
    return "–" if value is None else format_number(value)


def _per_24h(count: int, hours: float) -> tuple[float | None, float | None, float | None]:
    """A count per 24 hours of logs and its exact Poisson 95% interval (None without hours)."""
    if not hours:
        return None, None, None
    low, high = poisson_rate_interval(count, hours / HOURS_PER_DAY)
    return count / hours * HOURS_PER_DAY, low, high


def _tracker_part(h: dict, key: str) -> dict | None:
    """A tracker share's count, denominator and interval; a headline stored before they were kept has none."""
    return (h.get("tracker_counts") or {}).get(key)


def _of(count: int, whole: int, low: float | None, high: float | None) -> str:
    """``20 of 38: 52.63% (37.26–67.52%)``: a count with its denominator, its share and the share's interval."""
    return f"{count:,} of {whole:,}" + (f": {format_rate(count / whole, low, high)}" if whole else "")


def _events(h: dict) -> str:
    """``deaths 0.3567 (0.009031–1.988), OOMs … per 24 h; 1 / 1 in 67.28 h`` for one epoch's stability."""
    stab = h["stability"]
    parts = []
    for kind, label in (("deaths", "deaths"), ("ooms", "OOMs")):
        rate, low, high = _per_24h(stab[kind], stab["hours"])
        parts.append(f"{label} {_num(rate)} ({_num(low)}–{_num(high)})")
    return f"{', '.join(parts)} per 24 h; {stab['deaths']} / {stab['ooms']} in {_num(stab['hours'])} h"


def index_rows(headlines: list[dict]) -> list[dict[str, str]]:
    """One row of text per epoch: what both pages show in their table (counts with their denominators,
    rates in percent with their 95% intervals: Wilson for shares, bootstrap for MAL, exact Poisson per 24 h)."""
    rows = []
    for h in sorted(headlines, key=lambda h: h["epoch"]):
        rates = {r["group"]: r for r in h["rates"]}

        def rate(group: str, rates: dict = rates) -> str:
            r = rates.get(group)
            return "–" if r is None else _of(r["bad"], r["answers"], r["low"], r["high"])

        verdicts: dict[str, int] = {}
        for v in h["verdicts"]:
            verdicts[v["build"]] = verdicts.get(v["build"], 0) + v["total"]
        tracker, part = h["tracker"], _tracker_part(h, "protocol_invalid_share")
        if tracker is None:
            protocol = "–"
        elif part is None or part["count"] is None or part["of"] is None:
            protocol = format_rate(tracker["protocol_invalid_share"])
        else:
            protocol = _of(part["count"], part["of"], part["low"], part["high"])
        rows.append(
            {
                "epoch": str(h["epoch"]),
                "closed": (h["closed_at"] or "")[:16].replace("T", " "),
                "host challenged or invalidated": rate("host"),
                "others in the same escrows": rate("others"),
                "verdicts cast": "; ".join(f"{b}: {n:,}" for b, n in verdicts.items()) or "–",
                "mean acceptance length": "; ".join(
                    f"{a['build']}: {_num(a['mal'])} ({_num(a['low'])}–{_num(a['high'])})" for a in h["acceptance"]
                )
                or "–",
                "deaths / OOMs per 24 h": "–" if h["stability"] is None else _events(h),
                "tracker protocol invalid": protocol,
                "report": f"epoch-{h['epoch']}/report.html",
            }
        )
    return rows


def index_findings(headlines: list[dict]) -> list[dict[str, str]]:
    """The main findings across epochs that open the index: one line per question, each epoch's number with
    its denominator and its interval (method named), each pointing at its trend chart (``#trend-<stem>``)."""
    from pipeline.evidence.stats import WILSON, wilson_interval

    hs = sorted(headlines, key=lambda h: h["epoch"])
    wilson = f"{WILSON} 95%"
    out = []

    def line(label: str, chart: str, parts: list[str]) -> None:
        if parts:
            out.append({"label": label, "chart": chart, "text": "; ".join(parts)})

    for group, label in (("host", "The host's answers"), ("others", "Other executors in the same escrows")):
        parts = [
            f"epoch {h['epoch']}: " + share(r["bad"], r["answers"], "answers", r["low"], r["high"], wilson)
            for h in hs
            for r in h["rates"]
            if r["group"] == group
        ]
        line(label, "rates", [p + " challenged or invalidated" for p in parts])
    verdicts = []
    for h in hs:
        by_build: dict[str, list[int]] = {}
        for v in h["verdicts"]:
            total, invalid = by_build.setdefault(v["build"], [0, 0])
            by_build[v["build"]] = [total + v["total"], invalid + v["invalid"]]
        for build, (total, invalid) in by_build.items():
            low, high = wilson_interval(invalid, total)
            verdicts.append(
                f"epoch {h['epoch']}, {build}: " + share(invalid, total, "verdicts invalid", low, high, wilson)
            )
    line("The host's verdicts by build", "verdicts", verdicts)
    line(
        "Mean acceptance length",
        "acceptance",
        [
            f"epoch {h['epoch']}, {a['build']}: {_num(a['mal'])} tokens per step "
            f"({interval_text(a['low'], a['high'], 'percentile bootstrap 95%')}) over {a['drafts']:,} drafts"
            for h in hs
            for a in h["acceptance"]
        ],
    )
    stability = []
    for h in hs:
        if (stab := h["stability"]) is None:
            continue
        texts = []
        for kind, noun in (("deaths", "engine death"), ("ooms", "OOM")):
            per_day, lo, hi = _per_24h(stab[kind], stab["hours"])
            texts.append(
                f"{stab[kind]:,} {noun}{'' if stab[kind] == 1 else 's'}"
                + ("" if per_day is None else f" ({_num(per_day)} per 24 h, {interval_text(lo, hi, POISSON + ' 95%')})")
            )
        stability.append(f"epoch {h['epoch']}: {', '.join(texts)} in {_num(stab['hours'])} hours of logs")
    line("Engine deaths and OOMs", "stability", stability)
    tracker = []
    for h in hs:
        part = _tracker_part(h, "protocol_invalid_share")
        if part is not None and part["count"] is not None and part["of"] is not None:
            text = share(part["count"], part["of"], "assigned nonces", part["low"], part["high"], wilson)
            tracker.append(f"epoch {h['epoch']}: {text} recorded invalid by the chain")
        elif h["tracker"] is not None:
            tracker.append(f"epoch {h['epoch']}: {format_rate(h['tracker']['protocol_invalid_share'])}")
    line("Protocol invalid (tracker)", "tracker", tracker)
    return out
