"""The index's charts, from the headlines (pipeline/output/report/index_data.py): builds over the epochs,
and the rates, verdicts, acceptance, stability and tracker series (pipeline/output/report/index.py writes them)."""

from __future__ import annotations

from typing import Any

import polars as pl

from pipeline.evidence.stats import POISSON
from pipeline.output.report.index_data import TRACKER_SHARES, _per_24h, _tracker_part, headline  # noqa: F401


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
