"""Every epoch on one page: OUTPUT/index.html and index.md, one row per closed epoch with its report's
headline numbers and a link to it, and trend charts across epochs with the host's build segments marked.

The numbers are the epoch reports' own: `headline(report)` reads them from the evidence results of a report
as it is written (the same results its findings print), `run` stores them with the report's row
(`epoch_reports_t.headline`), and `write_index` draws the page from the stored headlines alone, so the index
can be rebuilt without recomputing any epoch and says nothing its reports do not.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.evidence.stats import POISSON, poisson_rate_interval
from pipeline.evidence.tables.tracker import SHARES as TRACKER_PARTS
from pipeline.output.render.markdown import escape
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


def build_spans(headlines: list[dict]) -> list[dict]:
    """Each build's first and last epoch (the builds its report's sections name, and those the build timeline
    puts in the epoch), in order of first epoch."""
    spans: dict[str, list[int]] = {}
    for h in sorted(headlines, key=lambda h: h["epoch"]):
        for b in [*(seg["build"] for seg in h.get("segments") or []), *h["builds"]]:
            spans.setdefault(b, [h["epoch"], h["epoch"]])[1] = h["epoch"]
    return [{"build": b, "first": s[0], "last": s[1]} for b, s in sorted(spans.items(), key=lambda kv: kv[1])]


def _per_epoch(headlines: list[dict], key: str, schema: dict) -> pl.DataFrame:
    """The rows under `key` of every epoch's headline, each with its epoch."""
    return pl.DataFrame([{"epoch": h["epoch"], **row} for h in headlines for row in h[key]], schema=schema)


# Builds are coloured alike on every trend chart (their shading and their marks); the other series
# (answers of, deaths/OOMs, tracker shares) take darker colours of their own.
BUILD_COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#9d755d", "#bab0ac", "#eeca3b", "#ff9da6")
SERIES_COLOURS = ("#1b1f23", "#d62728", "#17becf", "#7f7f7f")


def epoch_bands(h: dict, order: list[str]) -> list[dict]:
    """One epoch's build bands inside its column [epoch − ½, epoch + ½]: at the build boundaries, each build
    over the part of the epoch's span it was in effect (the build timeline); a headline stored without them
    splits the column evenly between the builds that ran in it (in order of their first epoch)."""
    epoch = h["epoch"]
    if h.get("segments"):
        return [
            {"build": seg["build"], "epoch": epoch, "x0": epoch - 0.5 + seg["from"], "x1": epoch - 0.5 + seg["to"]}
            for seg in h["segments"]
        ]
    builds = sorted(h["builds"], key=order.index)
    width = 1 / len(builds) if builds else 1.0
    return [
        {"build": b, "epoch": epoch, "x0": epoch - 0.5 + i * width, "x1": epoch - 0.5 + (i + 1) * width}
        for i, b in enumerate(builds)
    ]


def build_bands(headlines: list[dict]) -> pl.DataFrame:
    """The shading of the builds: every epoch's `epoch_bands`, so a mark drawn for a build sits in its band,
    adjacent bands touch and no two overlap."""
    order = [s["build"] for s in build_spans(headlines)]
    rows = [band for h in headlines for band in epoch_bands(h, order)]
    return pl.DataFrame(rows, schema={"build": pl.String, "epoch": pl.Int64, "x0": pl.Float64, "x1": pl.Float64})


def band_centre(h: dict, build: str, order: list[str]) -> float:
    """Where a mark of ``build`` in epoch ``h`` goes: the middle of its (longest) band, else the epoch."""
    bands = [b for b in epoch_bands(h, order) if b["build"] == build]
    if not bands:
        return float(h["epoch"])
    widest = max(bands, key=lambda b: b["x1"] - b["x0"])
    return (widest["x0"] + widest["x1"]) / 2


class _Trend:
    """What every trend chart shares: the epoch axis, the builds' colours and their shaded bands."""

    def __init__(self, hs: list[dict]):
        import altair as alt

        self.epochs = [h["epoch"] for h in hs]
        self.xscale = alt.Scale(domain=[min(self.epochs) - 0.5, max(self.epochs) + 0.5], nice=False, zero=False)
        self.x = alt.X("epoch:Q", title="epoch", scale=self.xscale, axis=alt.Axis(values=self.epochs, format="d"))
        builds = [s["build"] for s in build_spans(hs)]
        self.order = list(builds)  # builds in order of first epoch: the bands' order
        builds += sorted(
            {a["build"] for h in hs for a in h["acceptance"]}
            | {v["build"] for h in hs for v in h["verdicts"]} - set(builds)
        )
        scale = alt.Scale(domain=builds, range=[BUILD_COLOURS[i % len(BUILD_COLOURS)] for i in range(len(builds))])
        self.build_colour = alt.Color("build:N", title="build", scale=scale, sort=builds)
        self.bands = build_bands(hs)

    @staticmethod
    def series(field: str, title: str | None, domain: list[str]) -> Any:
        import altair as alt

        return alt.Color(
            f"{field}:N", title=title, scale=alt.Scale(domain=domain, range=list(SERIES_COLOURS[: len(domain)]))
        )

    def with_builds(self, chart: Any, title: str, shared: bool = False) -> dict:
        import altair as alt

        from pipeline.output.render.charts import legible

        layers: list[alt.Chart | alt.LayerChart | alt.FacetChart] = [chart]
        if self.bands.height:
            band = (
                alt.Chart(self.bands)
                .mark_rect(opacity=0.15)
                .encode(
                    x=alt.X("x0:Q", scale=self.xscale), x2="x1:Q", color=self.build_colour, tooltip=["build", "epoch"]
                )
            )
            layers = [band, chart]
        spec = alt.layer(*layers).resolve_scale(color="shared" if shared else "independent")
        # the legend shows each build's colour whole (the shading is faint; the marks are not)
        spec = spec.properties(title=title, width=520, height=220).configure_legend(symbolOpacity=1)
        out = legible(spec.to_dict())
        assert out is not None
        return out


def charts(headlines: list[dict]) -> dict[str, dict]:
    """The trend charts (Vega-Lite) by file stem, each over the epochs with the build segments shaded; every
    plotted estimate with the interval its table reports."""
    hs = sorted(headlines, key=lambda h: h["epoch"])
    trend = _Trend(hs)
    out: dict[str, dict] = {}
    for stem, chart in (
        ("rates", _rates_chart),
        ("verdicts", _verdicts_chart),
        ("acceptance", _acceptance_chart),
        ("stability", _stability_chart),
        ("tracker", _tracker_chart),
    ):
        spec = chart(hs, trend)
        if spec is not None:
            out[stem] = spec
    return out


def _rates_chart(hs: list[dict], trend: _Trend) -> dict | None:
    import altair as alt

    rates = _per_epoch(
        hs,
        "rates",
        {
            "epoch": pl.Int64,
            "group": pl.String,
            "answers": pl.Int64,
            "bad": pl.Int64,
            "rate": pl.Float64,
            "low": pl.Float64,
            "high": pl.Float64,
        },
    )
    if not rates.height:
        return None
    base = alt.Chart(rates).encode(x=trend.x, color=trend.series("group", "answers of", ["host", "others"]))
    return trend.with_builds(
        alt.layer(
            base.mark_area(opacity=0.25).encode(
                y=alt.Y("low:Q", title="challenged or invalidated", axis=alt.Axis(format="%")), y2="high:Q"
            ),
            base.mark_line(point=True).encode(
                y="rate:Q", tooltip=["epoch", "group", "bad", "answers", "rate", "low", "high"]
            ),
        ),
        "Challenged or invalidated: the host against the other executors (Wilson 95%)",
    )


def _verdicts_chart(hs: list[dict], trend: _Trend) -> dict | None:
    import altair as alt

    verdicts = _per_epoch(
        hs,
        "verdicts",
        {"epoch": pl.Int64, "build": pl.String, "kind": pl.String, "total": pl.Int64, "invalid": pl.Int64},
    )
    if not verdicts.height:
        return None
    return trend.with_builds(
        alt.Chart(verdicts)
        .mark_bar(size=18)
        .encode(
            x=trend.x,
            y=alt.Y("sum(total):Q", title="verdicts cast"),
            color=trend.build_colour,
            tooltip=["epoch", "build", "kind", "total", "invalid"],
        ),
        "Verdicts the host cast, by build",
        shared=True,
    )


def _acceptance_chart(hs: list[dict], trend: _Trend) -> dict | None:
    import altair as alt

    acc = _per_epoch(
        hs,
        "acceptance",
        {
            "epoch": pl.Int64,
            "build": pl.String,
            "mal": pl.Float64,
            "low": pl.Float64,
            "high": pl.Float64,
            "drafts": pl.Int64,
        },
    )
    if not acc.height:
        return None
    # each build's estimate in its build's band of the epoch
    by_epoch = {h["epoch"]: h for h in hs}
    acc = acc.with_columns(
        at=pl.struct("epoch", "build").map_elements(
            lambda r: band_centre(by_epoch[r["epoch"]], r["build"], trend.order), return_dtype=pl.Float64
        )
    )
    at = alt.X("at:Q", title="epoch", scale=trend.xscale, axis=alt.Axis(values=trend.epochs, format="d"))
    base = alt.Chart(acc).encode(x=at, color=trend.build_colour)
    return trend.with_builds(
        alt.layer(
            base.mark_errorbar(ticks=True).encode(
                y=alt.Y("low:Q", title="mean acceptance length", scale=alt.Scale(zero=False)), y2="high:Q"
            ),
            base.mark_point(filled=True, size=60).encode(
                y="mal:Q", tooltip=["epoch", "build", "mal", "low", "high", "drafts"]
            ),
        ),
        "Mean acceptance length with its bootstrap 95% interval",
        shared=True,
    )


def _stability_chart(hs: list[dict], trend: _Trend) -> dict | None:
    import altair as alt

    stab_rows = []
    for h in hs:
        if h["stability"] is None:
            continue
        # per build where the headline has them, each in its build's band (as the stability table attributes
        # deaths and OOMs); an older headline's epoch totals at the epoch
        parts = h.get("stability_by_build") or [{"build": None, **h["stability"]}]
        for part in parts:
            centre = float(h["epoch"]) if part["build"] is None else band_centre(h, part["build"], trend.order)
            for i, kind in enumerate(("deaths", "ooms")):
                rate, low, high = _per_24h(part[kind], part["hours"])
                if rate is None and part["build"] is not None:
                    continue  # no hours of logs under the build in this epoch
                # deaths left of the centre, OOMs right: equal values stay two visible series
                stab_rows.append(
                    {
                        "epoch": h["epoch"],
                        "build": part["build"],
                        "at": centre + (i - 0.5) * (0.06 if part["build"] is not None else 0.16),
                        "kind": kind,
                        "count": part[kind],
                        "per_24h": rate,
                        "low": low,
                        "high": high,
                    }
                )
    stab = pl.DataFrame(
        stab_rows,
        schema={
            "epoch": pl.Int64,
            "build": pl.String,
            "at": pl.Float64,
            "kind": pl.String,
            "count": pl.Int64,
            "per_24h": pl.Float64,
            "low": pl.Float64,
            "high": pl.Float64,
        },
    )
    if not stab.height:
        return None
    at = alt.X("at:Q", title="epoch", scale=trend.xscale, axis=alt.Axis(values=trend.epochs, format="d"))
    base = alt.Chart(stab).encode(x=at, color=trend.series("kind", None, ["deaths", "ooms"]))
    return trend.with_builds(
        alt.layer(
            base.mark_errorbar(ticks=True).encode(y=alt.Y("low:Q", title="per 24 hours of logs"), y2="high:Q"),
            base.mark_line(point=True).encode(
                y="per_24h:Q",
                strokeDash=alt.StrokeDash("kind:N", legend=None),
                tooltip=["epoch", "build", "kind", "count", "per_24h", "low", "high"],
            ),
        ),
        f"Engine deaths and OOMs per 24 hours of logs ({POISSON} 95%)",
    )


def _tracker_chart(hs: list[dict], trend: _Trend) -> dict | None:
    import altair as alt

    tracker_rows = []
    for h in hs:
        if not h["tracker"]:
            continue
        for k in TRACKER_SHARES:
            part = _tracker_part(h, k) or {}
            tracker_rows.append(
                {
                    "epoch": h["epoch"],
                    "share": k.removesuffix("_share"),
                    "value": h["tracker"][k],
                    "count": part.get("count"),
                    "of": part.get("of"),
                    "low": part.get("low"),
                    "high": part.get("high"),
                }
            )
    tracker = pl.DataFrame(
        tracker_rows,
        schema={
            "epoch": pl.Int64,
            "share": pl.String,
            "value": pl.Float64,
            "count": pl.Int64,
            "of": pl.Int64,
            "low": pl.Float64,
            "high": pl.Float64,
        },
    )
    if not tracker.height:
        return None
    shares = [k.removesuffix("_share") for k in TRACKER_SHARES]
    base = alt.Chart(tracker).encode(x=trend.x, color=trend.series("share", "tracker", shares))
    return trend.with_builds(
        alt.layer(
            base.mark_errorbar(ticks=True).encode(
                y=alt.Y("low:Q", title="share (Wilson 95%)", axis=alt.Axis(format="%")), y2="high:Q"
            ),
            base.mark_line(point=True).encode(
                y="value:Q", tooltip=["epoch", "share", "count", "of", "value", "low", "high"]
            ),
        ),
        "What the tracker said, epoch over epoch",
    )


def render_index_markdown(host: str, headlines: list[dict], chart_stems: list[str]) -> str:
    rows = index_rows(headlines)
    header = list(rows[0]) if rows else []
    lines = [
        f"# Every epoch: {escape(host)}",
        "",
        f"{len(rows)} closed epoch{'s' if len(rows) != 1 else ''}; each row of the table links to its report.",
        "",
    ]
    findings = index_findings(headlines)
    if findings:
        lines += ["## Main findings across epochs", ""]
        lines += [f"- [{f['label']}](index-charts/{f['chart']}.svg): {escape(f['text'])}" for f in findings]
        lines.append("")
    if rows:
        lines += ["## Epoch by epoch", ""]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("| " + " | ".join("---" for _ in header) + " |")
        for r in rows:
            cells = [escape(v) for k, v in r.items() if k != "report"] + [
                f"[report]({r['report'].replace('.html', '.md')})"
            ]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    spans = build_spans(headlines)
    if spans:
        lines.append(
            "Build segments: "
            + "; ".join(f"{escape(s['build'])} (epochs {s['first']}–{s['last']})" for s in spans)
            + "."
        )
        lines.append("")
    if chart_stems:
        lines += ["## Trends", ""]
    for stem in chart_stems:
        lines += [f"![{stem}](index-charts/{stem}.svg)", ""]
    return "\n".join(lines)


def render_index_html(host: str, headlines: list[dict], svgs: dict[str, str]) -> str:
    from jinja2 import Environment, FunctionLoader, StrictUndefined

    from pipeline.core.paths import REPORTS_DIR

    env = Environment(
        loader=FunctionLoader(lambda name: (REPORTS_DIR / name).read_text(encoding="utf-8")),
        undefined=StrictUndefined,
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env.get_template("index.html.j2").render(
        host=host,
        rows=index_rows(headlines),
        findings=index_findings(headlines),
        spans=build_spans(headlines),
        svgs=svgs,
    )


def write_index(host: str, headlines: list[dict], out_dir: Path) -> Path:
    """Write OUT/index.md, index.html and index-charts/ (SVG and PNG of each trend chart, headlines.json):
    everything is written beside its place first and renamed into it, so a failure (a full disk, Ctrl-C)
    leaves the previous index whole and no temporary file behind."""
    from pipeline.output.render.images import svg_and_png

    out_dir.mkdir(parents=True, exist_ok=True)
    specs = charts(headlines) if headlines else {}
    pid = os.getpid()
    staging = out_dir / f".index-charts.tmp-{pid}"
    pages = {name: out_dir / f".{name}.tmp-{pid}" for name in ("index.md", "index.html")}
    shutil.rmtree(staging, ignore_errors=True)
    try:
        staging.mkdir()
        svgs = {}
        for stem, spec in specs.items():
            svgs[stem], png = svg_and_png(spec)
            (staging / f"{stem}.svg").write_text(svgs[stem], encoding="utf-8")
            (staging / f"{stem}.png").write_bytes(png)
        ordered = sorted(headlines, key=lambda h: h["epoch"])
        (staging / "headlines.json").write_text(json.dumps(ordered, indent=1) + "\n", encoding="utf-8")
        pages["index.md"].write_text(render_index_markdown(host, headlines, list(specs)), encoding="utf-8")
        pages["index.html"].write_text(render_index_html(host, headlines, svgs), encoding="utf-8")
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        for tmp in pages.values():
            tmp.unlink(missing_ok=True)
        raise
    final = out_dir / "index-charts"
    shutil.rmtree(final, ignore_errors=True)
    staging.rename(final)
    for name, tmp in pages.items():
        tmp.replace(out_dir / name)
    return out_dir / "index.html"
