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

from pipeline.output.render.markdown import escape
from pipeline.output.render.text import format_number, format_percent
from pipeline.output.report.findings import pooled
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
    if (tracker := results.get("tracker")) is not None and "participant" in tracker.rows.columns:
        mine = tracker.rows.filter((pl.col("participant") == report.host) & (pl.col("epoch") == report.epoch))
        if mine.height:
            row = mine.row(0, named=True)
            out["tracker"] = {k: row.get(k) for k in TRACKER_SHARES}
    # the builds that ran in the epoch: those with verdicts, acceptance windows or hours of logs in it
    active = [v["build"] for v in out["verdicts"]] + [a["build"] for a in out["acceptance"]]
    if stab is not None:
        active += stab.rows.filter(pl.col("hours_observed") > 0)["build"].to_list()
    out["builds"] = sorted({b for b in active if b and b != "unattributed"})
    return out


TRACKER_SHARES = ("slow_decode_share", "slow_chunk_share", "protocol_invalid_share", "protocol_misses_share")


def _pct(value: float | None) -> str:
    return "–" if value is None else format_percent(value)


def _num(value: float | None) -> str:
    return "–" if value is None else format_number(value)


def index_rows(headlines: list[dict]) -> list[dict[str, str]]:
    """One row of text per epoch: what both pages show in their table."""
    rows = []
    for h in sorted(headlines, key=lambda h: h["epoch"]):
        rates = {r["group"]: r for r in h["rates"]}

        def rate(group: str, rates: dict = rates) -> str:
            r = rates.get(group)
            if r is None:
                return "–"
            return f"{r['bad']:,} of {r['answers']:,} ({_pct(r['rate'])}; {_pct(r['low'])}–{_pct(r['high'])})"

        verdicts: dict[str, int] = {}
        for v in h["verdicts"]:
            verdicts[v["build"]] = verdicts.get(v["build"], 0) + v["total"]
        stab = h["stability"]
        tracker = h["tracker"]
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
                "deaths / OOMs per 24 h": "–"
                if stab is None
                else f"{_num(stab['deaths_per_24h'])} / {_num(stab['ooms_per_24h'])} "
                f"({stab['deaths']} / {stab['ooms']} in {_num(stab['hours'])} h)",
                "tracker protocol invalid": "–" if tracker is None else _pct(tracker["protocol_invalid_share"]),
                "report": f"epoch-{h['epoch']}/report.html",
            }
        )
    return rows


def build_spans(headlines: list[dict]) -> list[dict]:
    """Each build's first and last epoch (the builds its report's sections name), in order of first epoch."""
    spans: dict[str, list[int]] = {}
    for h in sorted(headlines, key=lambda h: h["epoch"]):
        for b in h["builds"]:
            spans.setdefault(b, [h["epoch"], h["epoch"]])[1] = h["epoch"]
    return [{"build": b, "first": s[0], "last": s[1]} for b, s in sorted(spans.items(), key=lambda kv: kv[1])]


def _per_epoch(headlines: list[dict], key: str, schema: dict) -> pl.DataFrame:
    """The rows under `key` of every epoch's headline, each with its epoch."""
    return pl.DataFrame([{"epoch": h["epoch"], **row} for h in headlines for row in h[key]], schema=schema)


def charts(headlines: list[dict]) -> dict[str, dict]:
    """The trend charts (Vega-Lite) by file stem, each over the epochs with the build segments shaded."""
    import altair as alt

    from pipeline.output.render.charts import legible

    hs = sorted(headlines, key=lambda h: h["epoch"])
    epochs = [h["epoch"] for h in hs]
    xscale = alt.Scale(domain=[min(epochs) - 0.5, max(epochs) + 0.5])
    x = alt.X("epoch:Q", title="epoch", scale=xscale, axis=alt.Axis(values=epochs, format="d"))
    spans = pl.DataFrame(build_spans(hs)) if any(h["builds"] for h in hs) else None

    def with_builds(chart: alt.Chart | alt.LayerChart | alt.FacetChart, title: str) -> dict:
        layers: list[alt.Chart | alt.LayerChart | alt.FacetChart] = [chart]
        if spans is not None:
            data = spans.with_columns(x0=pl.col("first") - 0.45, x1=pl.col("last") + 0.45)
            band = (
                alt.Chart(data)
                .mark_rect(opacity=0.12)
                .encode(x=alt.X("x0:Q", scale=xscale), x2="x1:Q", color=alt.Color("build:N", title="build segment"))
            )
            layers = [band, chart]
        spec = alt.layer(*layers).resolve_scale(color="independent").properties(title=title, width=520, height=220)
        out = legible(spec.to_dict())
        assert out is not None
        return out

    out: dict[str, dict] = {}
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
    if rates.height:
        base = alt.Chart(rates).encode(x=x, color=alt.Color("group:N", title="answers of"))
        out["rates"] = with_builds(
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
    verdicts = _per_epoch(
        hs,
        "verdicts",
        {"epoch": pl.Int64, "build": pl.String, "kind": pl.String, "total": pl.Int64, "invalid": pl.Int64},
    )
    if verdicts.height:
        out["verdicts"] = with_builds(
            alt.Chart(verdicts)
            .mark_bar(size=18)
            .encode(
                x=x,
                y=alt.Y("sum(total):Q", title="verdicts cast"),
                color=alt.Color("build:N", title="build of the verdict"),
                tooltip=["epoch", "build", "kind", "total", "invalid"],
            ),
            "Verdicts the host cast, by build",
        )
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
    if acc.height:
        base = alt.Chart(acc).encode(x=x, color=alt.Color("build:N", title="build"))
        out["acceptance"] = with_builds(
            alt.layer(
                base.mark_errorbar().encode(
                    y=alt.Y("low:Q", title="mean acceptance length", scale=alt.Scale(zero=False)), y2="high:Q"
                ),
                base.mark_point(filled=True, size=60).encode(
                    y="mal:Q", tooltip=["epoch", "build", "mal", "low", "high", "drafts"]
                ),
            ),
            "Mean acceptance length with its bootstrap 95% interval",
        )
    stab = pl.DataFrame(
        [
            {"epoch": h["epoch"], "kind": kind, "per_24h": h["stability"][f"{kind}_per_24h"]}
            for h in hs
            if h["stability"] is not None
            for kind in ("deaths", "ooms")
        ],
        schema={"epoch": pl.Int64, "kind": pl.String, "per_24h": pl.Float64},
    )
    if stab.height:
        out["stability"] = with_builds(
            alt.Chart(stab)
            .mark_line(point=True)
            .encode(
                x=x,
                y=alt.Y("per_24h:Q", title="per 24 hours of logs"),
                color=alt.Color("kind:N", title=None),
                tooltip=["epoch", "kind", "per_24h"],
            ),
            "Engine deaths and OOMs per 24 hours served",
        )
    tracker = pl.DataFrame(
        [
            {"epoch": h["epoch"], "share": k.removesuffix("_share"), "value": h["tracker"][k]}
            for h in hs
            if h["tracker"]
            for k in TRACKER_SHARES
        ],
        schema={"epoch": pl.Int64, "share": pl.String, "value": pl.Float64},
    )
    if tracker.height:
        out["tracker"] = with_builds(
            alt.Chart(tracker)
            .mark_line(point=True)
            .encode(
                x=x,
                y=alt.Y("value:Q", title="share", axis=alt.Axis(format="%")),
                color=alt.Color("share:N", title="tracker"),
                tooltip=["epoch", "share", "value"],
            ),
            "What the tracker said, epoch over epoch",
        )
    return out


def render_index_markdown(host: str, headlines: list[dict], chart_stems: list[str]) -> str:
    rows = index_rows(headlines)
    header = list(rows[0]) if rows else []
    lines = [
        f"# Every epoch: {escape(host)}",
        "",
        f"{len(rows)} closed epoch{'s' if len(rows) != 1 else ''}; each row links to its report.",
        "",
    ]
    if rows:
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
    for stem in chart_stems:
        lines += [f"![{stem}](index-charts/{stem}.svg)", ""]
    return "\n".join(lines)


def render_index_html(host: str, headlines: list[dict], svgs: dict[str, str]) -> str:
    from jinja2 import Environment, FunctionLoader, StrictUndefined

    from pipeline.core.paths import REPORTS_DIR

    env = Environment(
        loader=FunctionLoader(lambda name: (REPORTS_DIR / name).read_text()),
        undefined=StrictUndefined,
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env.get_template("index.html.j2").render(
        host=host, rows=index_rows(headlines), spans=build_spans(headlines), svgs=svgs
    )


def write_index(host: str, headlines: list[dict], out_dir: Path) -> Path:
    """Write OUT/index.md, index.html and index-charts/ (SVG and PNG of each trend chart, headlines.json):
    everything is written beside its place first and renamed into it, so a failure (a full disk, Ctrl-C)
    leaves the previous index whole and no temporary file behind."""
    import vl_convert as vlc

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
            svgs[stem] = vlc.vegalite_to_svg(spec)
            (staging / f"{stem}.svg").write_text(svgs[stem])
            (staging / f"{stem}.png").write_bytes(vlc.vegalite_to_png(spec, scale=2))
        ordered = sorted(headlines, key=lambda h: h["epoch"])
        (staging / "headlines.json").write_text(json.dumps(ordered, indent=1) + "\n")
        pages["index.md"].write_text(render_index_markdown(host, headlines, list(specs)))
        pages["index.html"].write_text(render_index_html(host, headlines, svgs))
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
