"""Statistics that say what they are: every test and interval of the evidence tables names its
method, sidedness, correction and level; nested results render as lines and typed JSON fields;
degenerate cases explain themselves; and every number is recomputed here with scipy and
statsmodels directly on the counts of the sample warehouse."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import orjson
import polars as pl
import pytest
from scipy import stats as scipy_stats
from statsmodels.stats.contingency_tables import StratifiedTable
from statsmodels.stats.multitest import multipletests

from pipeline.evidence import compute
from pipeline.evidence.result import EvidenceResult
from pipeline.evidence.stats import (
    bootstrap_ratio,
    breslow_day_test,
    cmh_test,
    fisher_exact_2x2,
    fisher_freeman_halton,
    holm_adjust,
)
from pipeline.output.render import render
from pipeline.samples.logs import HOST
from pipeline.warehouse.database import fetch_frame, open_for_write, open_read_only
from tests.factories import log_samples_warehouse, sample_warehouse


@pytest.fixture(scope="module")
def warehouse(request, timeline):
    """The evidence sample (`timeline.copy(4)`, SQLite layout, with its accounting ledger) and its build timeline."""
    path = sample_warehouse(
        request, timeline.copy(last_epoch=4), ledger=True, label="focal sqlite", builds=timeline
    ).path
    con = open_read_only(path)
    yield con, timeline.focal_host
    con.close()


def run(warehouse, name, **options):
    con, host = warehouse
    options.setdefault("allow_open", True)  # epoch 4 of the samples is open: its tests are computed, marked
    return compute(name, con, host=host, command=f"gonka-evidence evidence {name}", **options)


def holm_of(stats: dict) -> None:
    """Every ``p_holm`` equals statsmodels' Holm adjustment of the family the table names."""
    family = stats["multiple_testing"]
    members = []
    for name in family["family"]:
        if " (" in name:
            group, key = name.split(" (", 1)
            members.append(stats[group][key[:-1]])
        else:
            members.append(stats[name])
    assert family["method"] == "Holm" and family["tests"] == len(members) >= 2
    expected = multipletests([m["p_value"] for m in members], method="holm")[1]
    assert [m["p_holm"] for m in members] == pytest.approx(list(expected), rel=1e-12)


def strata_of(rows: pl.DataFrame) -> list[list[list[int]]]:
    """Per-escrow 2x2 tables (host / others × challenged or invalidated / not) from --by-escrow rows."""
    detail = rows.filter(pl.col("escrow_id") != "all")
    tables = []
    for (_escrow,), part in detail.group_by("escrow_id", maintain_order=True):
        cells = {r["group"]: (r["challenged_or_invalidated"], r["answers"]) for r in part.iter_rows(named=True)}
        tables.append([[cells[g][0], cells[g][1] - cells[g][0]] for g in ("host", "others")])
    return tables


def statsmodels_cmh(tables):
    used = [t for t in tables if sum(t[0]) and sum(t[1])]
    st = StratifiedTable(np.stack([np.asarray(t, float) for t in used], axis=2))
    return st, used


# -- peer-invalidation --------------------------------------------------------------------------------------


def test_peer_invalidation_tests_are_named_and_match_statsmodels(warehouse):
    result = run(warehouse, "peer-invalidation", epoch=3, by_escrow=True)
    stats = result.stats
    assert stats["fisher"]["test"] == "Fisher exact" and stats["fisher"]["alternative"] == "two-sided"
    cmh = stats["cmh"]
    assert (cmh["test"], cmh["alternative"], cmh["or_ci_method"]) == (
        "Cochran–Mantel–Haenszel",
        "two-sided",
        "Robins–Breslow–Greenland",
    )
    tables = strata_of(result.rows)
    st, used = statsmodels_cmh(tables)
    corrected = cmh["correction"] == "continuity 0.5"
    null = st.test_null_odds(correction=corrected)
    assert cmh["statistic"] == pytest.approx(float(null.statistic), rel=1e-12)
    assert cmh["p_value"] == pytest.approx(float(scipy_stats.chi2.sf(null.statistic, 1)), rel=1e-9)
    assert cmh["pooled_odds_ratio"] == pytest.approx(float(st.oddsratio_pooled), rel=1e-12)
    assert (cmh["or_ci_low"], cmh["or_ci_high"]) == pytest.approx(tuple(st.oddsratio_pooled_confint()), rel=1e-12)
    bd = stats["breslow_day"]
    expected = st.test_equal_odds(adjust=False)
    assert bd["test"] == "Breslow–Day" and bd["df"] == len(used) - 1
    assert (bd["statistic"], bd["p_value"]) == pytest.approx((float(expected.statistic), float(expected.pvalue)))
    holm_of(stats)
    assert stats["interval"]["interval"] == "Wilson score" and stats["interval"]["level"] == 0.95

    text = render(result, "markdown")
    assert "- fisher: Fisher exact, two-sided: p = " in text
    assert "- cmh: Cochran–Mantel–Haenszel, two-sided, correction: continuity 0.5: χ² = " in text
    assert "Robins–Breslow–Greenland" in text and "- breslow_day: Breslow–Day, " in text
    assert (
        "- interval: Wilson score 95% interval of challenged_or_invalidated / answers, per row "
        "(columns ci_low, ci_high)" in text
    )
    assert "Holm p = " in text and "- multiple_testing: Holm-adjusted p-values" in text
    document = orjson.loads(render(result, "json"))["stats"]
    assert document["cmh"]["correction"] == "continuity 0.5" and document["breslow_day"]["df"] == len(used) - 1


def test_peer_invalidation_by_build(warehouse):
    result = run(warehouse, "peer-invalidation", epoch=3, by_build=True)
    rows = result.rows
    assert rows.columns[:2] == ["build", "group"]
    pooled = rows.filter(pl.col("build") == "all")
    per_build = rows.filter(pl.col("build") != "all")
    builds = per_build["build"].unique(maintain_order=True).to_list()
    assert len(builds) >= 2, "epoch 3 of the sample mixes builds"
    # Every answer is in exactly one build's rows.
    for group in ("host", "others"):
        for column in ("answers", "challenged_or_invalidated"):
            assert (
                per_build.filter(pl.col("group") == group)[column].sum()
                == pooled.filter(pl.col("group") == group)[column].item()
            )
    assert list(result.stats["cmh_by_build"]) == builds == list(result.stats["breslow_day_by_build"])

    # Independent recomputation: the host's build at each answer's event time from the build timeline.
    con, host = warehouse
    strata = fetch_frame(
        con,
        """
        WITH a AS (
          SELECT i.escrow_id, i.executor = $host AS is_host, i.challenged OR i.status = 'invalidated' AS bad,
                 (SELECT b.build FROM host_builds b WHERE b.host = $host AND i.event_at >= b.valid_from
                   AND (b.valid_to IS NULL OR i.event_at < b.valid_to)) AS build
          FROM inferences i WHERE i.finished AND i.status <> 'timed_out' AND i.epoch_id = 3
            AND i.escrow_id IN (SELECT escrow_id FROM inferences WHERE executor = $host AND finished
                                AND status <> 'timed_out' AND epoch_id = 3))
        SELECT coalesce(build, 'unattributed') AS build, escrow_id,
               count(*) FILTER (is_host AND bad) AS a, count(*) FILTER (is_host AND NOT bad) AS b,
               count(*) FILTER (NOT is_host AND bad) AS c, count(*) FILTER (NOT is_host AND NOT bad) AS d
        FROM a GROUP BY ALL ORDER BY build, escrow_id""",
        {"host": host},
    )
    for build in builds:
        tables = [
            [[r["a"], r["b"]], [r["c"], r["d"]]] for r in strata.filter(pl.col("build") == build).iter_rows(named=True)
        ]
        cmh = result.stats["cmh_by_build"][build]
        used = [t for t in tables if sum(t[0]) and sum(t[1])]
        assert (cmh["strata_used"], cmh["strata_dropped"]) == (len(used), len(tables) - len(used))
        if not used:
            assert cmh["note"] and math.isnan(cmh["p_value"])
            continue
        st, _ = statsmodels_cmh(tables)
        assert cmh["pooled_odds_ratio"] == pytest.approx(float(st.oddsratio_pooled), rel=1e-12)
        corrected = cmh["correction"] == "continuity 0.5"
        assert cmh["statistic"] == pytest.approx(float(st.test_null_odds(correction=corrected).statistic), rel=1e-12)
        bd = result.stats["breslow_day_by_build"][build]
        if len(used) >= 2 and "note" not in bd:
            assert bd["p_value"] == pytest.approx(float(st.test_equal_odds().pvalue), rel=1e-9)
        elif len(used) < 2:
            assert "needs at least two strata" in bd["note"]
    holm_of(result.stats)
    text = render(result, "markdown")
    for build in builds:
        assert f"- cmh_by_build ({build}): Cochran–Mantel–Haenszel" in text
    assert "{'" not in text and "nan" not in text


# -- votes-by-build, answers-by-sampling, tracker -----------------------------------------------------------


def test_votes_by_build_between_build_test(warehouse):
    result = run(warehouse, "votes-by-build")
    between = result.stats["between_builds"]
    assert list(between) == ["validation", "vote"]
    for kind, test in between.items():
        part = result.rows.filter(
            (pl.col("kind") == kind) & (pl.col("total") > 0) & (pl.col("build") != "unattributed")
        )
        assert test["test"] == "Fisher–Freeman–Halton" and test["builds"] == part["build"].to_list()
        assert test["p_value_method"] == "Monte Carlo, 9,999 tables, seed 0"
        if part.height < 2 or part["invalid"].sum() in (0, part["total"].sum()):
            assert math.isnan(test["p_value"]) and test["note"]
            continue
        method = scipy_stats.MonteCarloMethod(n_resamples=9_999, rng=np.random.default_rng(0))
        expected = scipy_stats.fisher_exact(np.array(part.select("invalid", "valid").rows()), method=method)
        assert test["p_value"] == float(expected.pvalue)
    assert "- between_builds (validation): Fisher–Freeman–Halton, two-sided" in render(result, "markdown")
    # Seeded: the same table twice gives the same bytes.
    assert render(run(warehouse, "votes-by-build"), "json") == render(result, "json")


def test_answers_by_sampling_cmh_across_builds(warehouse):
    result = run(warehouse, "answers-by-sampling")
    rows = result.rows.filter(pl.col("sampling") != "unknown")
    tables = []
    for build in sorted(rows["build"].unique().to_list()):
        cells = {
            r["sampling"]: (r["invalidated"], r["judged"])
            for r in rows.filter(pl.col("build") == build).iter_rows(named=True)
        }
        tables.append(
            [
                [cells.get(s, (0, 0))[0], cells.get(s, (0, 0))[1] - cells.get(s, (0, 0))[0]]
                for s in ("sampled", "greedy")
            ]
        )
    cmh = result.stats["cmh"]
    assert cmh["strata"] == "build" and cmh["rows"] == ["sampled", "greedy"]
    used = [t for t in tables if sum(t[0]) and sum(t[1])]
    assert cmh["strata_used"] == len(used) and cmh["strata_dropped"] == len(tables) - len(used)
    if used:
        st, _ = statsmodels_cmh(tables)
        corrected = cmh["correction"] == "continuity 0.5"
        assert cmh["statistic"] == pytest.approx(float(st.test_null_odds(correction=corrected).statistic), rel=1e-12)
    for build, test in result.stats.get("fisher_by_build", {}).items():
        t = tables[sorted(rows["build"].unique().to_list()).index(build)]
        assert test["p_value"] == pytest.approx(float(scipy_stats.fisher_exact(t).pvalue), rel=1e-12)
    if "multiple_testing" in result.stats:
        holm_of(result.stats)
    text = render(result, "markdown")
    assert "{'" not in text and " nan" not in text


def test_tracker_compare_renders_lines_and_holm(warehouse):
    con, host = warehouse
    result = run(warehouse, "tracker", epoch=2, compare=4)
    compare = result.stats["compare"]
    for test in compare.values():
        assert test["test"] == "Fisher exact" and test["epochs"] == [2, 4]
    if len(compare) >= 2:
        holm_of(result.stats)
    text = render(result, "markdown")
    assert "{'" not in text and "nan" not in text
    for share in compare:
        assert f"- compare ({share}): Fisher exact, two-sided: p = " in text


# -- degenerate cases and JSON types ------------------------------------------------------------------------


def test_infinite_and_undefined_odds_ratios_are_told_apart():
    infinite = fisher_exact_2x2(5, 0, 0, 5)
    assert math.isinf(infinite.odds_ratio) and "infinite" in infinite.note
    undefined = fisher_exact_2x2(0, 0, 3, 4)
    assert math.isnan(undefined.odds_ratio) and "no observations" in undefined.note
    result = EvidenceResult(
        "x",
        "T",
        {},
        pl.DataFrame(),
        stats={
            "fisher": infinite.as_stat(),
            "other": undefined.as_stat(),
            "low": fisher_exact_2x2(0, 5, 5, 0).as_stat(),
        },
    )
    document = orjson.loads(render(result, "json"))["stats"]
    assert document["fisher"]["odds_ratio"] == "inf"
    assert document["other"]["odds_ratio"] is None and document["other"]["note"] == undefined.note
    assert document["low"]["odds_ratio"] == 0.0
    text = render(result, "markdown")
    assert "- fisher: Fisher exact, two-sided: p = 0.007937, OR ∞; odds ratio infinite" in text
    assert "OR –; odds ratio undefined: one group has no observations" in text


def test_pooled_interval_says_why_it_is_missing():
    cmh = cmh_test([[[3, 0], [0, 4]], [[2, 0], [0, 2]]])
    assert math.isinf(cmh.pooled_odds_ratio) and math.isnan(cmh.or_ci_low)
    assert "infinite, no interval" in cmh.note
    text = render(EvidenceResult("x", "T", {}, pl.DataFrame(), stats={"cmh": cmh}), "markdown")
    assert "pooled OR ∞;" not in text and "pooled OR ∞, strata: 2 used, 0 dropped; pooled odds ratio infinite" in text
    assert (
        orjson.loads(render(EvidenceResult("x", "T", {}, pl.DataFrame(), stats={"cmh": cmh}), "json"))["stats"]["cmh"][
            "pooled_odds_ratio"
        ]
        == "inf"
    )
    # statsmodels solves a quadratic for the expected counts, which degenerates at a pooled odds ratio of 1.
    assert "cannot be solved" in breslow_day_test([[[40, 10], [10, 40]], [[10, 40], [40, 10]]]).note
    none = cmh_test([[[0, 0], [1, 2]]])
    assert none.note == "no stratum has observations in both groups"
    assert "at least two strata" in breslow_day_test([[[1, 2], [3, 4]]]).note


def test_breslow_day_sees_opposite_effects_the_pooled_ratio_hides():
    opposite = [[[40, 10], [10, 40]], [[12, 40], [40, 10]]]
    pooled = cmh_test(opposite)
    assert 0.5 < pooled.pooled_odds_ratio < 2 and pooled.p_value > 0.05
    bd = breslow_day_test(opposite)
    expected = StratifiedTable(np.stack([np.asarray(t, float) for t in opposite], axis=2)).test_equal_odds()
    assert bd.p_value == pytest.approx(float(expected.pvalue)) and bd.p_value < 1e-10


def test_holm_and_ffh_and_bootstrap_against_scipy_statsmodels():
    stats = {
        "a": {"test": "t", "p_value": 0.01},
        "b": {"x": {"test": "t", "p_value": 0.04}, "y": {"test": "t", "p_value": 0.03}},
        "c": {"test": "t", "p_value": math.nan},
    }
    family = holm_adjust(stats)
    assert family["family"] == ["a", "b (x)", "b (y)"]
    assert [stats["a"]["p_holm"], stats["b"]["x"]["p_holm"], stats["b"]["y"]["p_holm"]] == pytest.approx(
        list(multipletests([0.01, 0.04, 0.03], method="holm")[1])
    )
    assert "p_holm" not in stats["c"] and holm_adjust({"a": {"test": "t", "p_value": 0.5}}) is None

    rows = [[3, 10], [5, 20], [0, 30]]
    method = scipy_stats.MonteCarloMethod(n_resamples=9_999, rng=np.random.default_rng(0))
    assert fisher_freeman_halton(rows).p_value == float(scipy_stats.fisher_exact(np.array(rows), method=method).pvalue)
    assert fisher_freeman_halton([[0, 0], [1, 2]]).note == "needs at least two groups with observations"

    accepted, drafted = [10, 30, 5, 44, 21], [20, 50, 20, 60, 40]
    result = bootstrap_ratio(accepted, drafted)
    expected = scipy_stats.bootstrap(
        (np.array(accepted, float), np.array(drafted, float)),
        lambda a, d, axis=-1: a.sum(axis) / d.sum(axis),
        paired=True,
        vectorized=True,
        n_resamples=2_000,
        method="percentile",
        rng=np.random.default_rng(0),
    )
    assert (result.low, result.high) == (expected.confidence_interval.low, expected.confidence_interval.high)
    assert bootstrap_ratio([1], [2]).note == "needs at least two windows, has 1"


@pytest.fixture(scope="module")
def logs(request):
    con = open_for_write(log_samples_warehouse(request).path)
    yield con
    con.close()


def test_acceptance_bootstrap_over_windows(logs):
    result = compute("acceptance", logs, host=HOST, command="gonka-evidence evidence acceptance")
    windows = fetch_frame(
        logs,
        'SELECT build, source, accepted, drafted, drafts FROM spec_decode_windows WHERE host = $host ORDER BY "at"',
        {"host": HOST},
    )
    for row in result.rows.iter_rows(named=True):
        w = windows.filter((pl.col("build") == row["build"]) & (pl.col("source") == row["source"]))
        rng = np.random.default_rng(0)
        rate = scipy_stats.bootstrap(
            (w["accepted"].to_numpy().astype(float), w["drafted"].to_numpy().astype(float)),
            lambda a, d, axis=-1: a.sum(axis) / d.sum(axis),
            paired=True,
            vectorized=True,
            n_resamples=2_000,
            method="percentile",
            rng=rng,
        )
        assert (row["rate_boot_low"], row["rate_boot_high"]) == pytest.approx(
            (rate.confidence_interval.low, rate.confidence_interval.high), rel=1e-12
        )
        known = w.filter(pl.col("drafts") > 0)
        mal = scipy_stats.bootstrap(
            (known["accepted"].to_numpy().astype(float), known["drafts"].to_numpy().astype(float)),
            lambda a, d, axis=-1: 1 + a.sum(axis) / d.sum(axis),
            paired=True,
            vectorized=True,
            n_resamples=2_000,
            method="percentile",
            rng=np.random.default_rng(0),
        )
        assert (row["mal_boot_low"], row["mal_boot_high"]) == pytest.approx(
            (mal.confidence_interval.low, mal.confidence_interval.high), rel=1e-12
        )
        assert row["mal_boot_low"] <= row["mean_acceptance_length"] <= row["mal_boot_high"]
    boot = result.stats["bootstrap"]
    assert (boot["interval"], boot["resamples"], boot["seed"], boot["unit"]) == (
        "percentile bootstrap",
        2_000,
        0,
        "log windows",
    )
    text = render(result, "markdown")
    assert (  # "_*" escaped: GitHub would read "*, mal_boot_*" as emphasis
        "- bootstrap: percentile bootstrap 95% interval of acceptance_rate and mean_acceptance_length, per build "
        "(columns rate_boot\\_\\*, mal_boot\\_\\*), 2,000 resamples of the log windows, seed 0" in text
    )
    again = compute("acceptance", logs, host=HOST, command="gonka-evidence evidence acceptance")
    assert render(again, "json") == render(result, "json")


def test_evidence_help_does_not_import_scipy_or_statsmodels():
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: print(sorted(m for m in ('scipy', 'statsmodels') if m in sys.modules)))\n"
        "from pipeline.cli.app import app\n"
        "sys.argv = ['gonka-evidence', 'evidence', '--help']\n"
        "app()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parents[2])
    assert out.returncode == 0 and "peer-invalidation" in out.stdout
    assert out.stdout.strip().endswith("[]")


# -- every rate of every table carries its Wilson 95% interval, named, as statsmodels computes it ------------

# The counts behind each rate column: (part, whole) as docs/evidence.md defines the rate.
RATE_COUNTS = {
    "rate": ("challenged_or_invalidated", "answers"),
    "others_rate": ("others_challenged_or_invalidated", "others_answers"),
    "invalid_rate": ("invalid", "total"),
    "invalid_share": ("invalid", "verdicts"),
    "agreement_rate": ("agreed", "resolved"),
    "invalidated_rate": ("invalidated", "judged"),
    "passed_share": ("passed", "judged"),
    "acceptance_rate": ("accepted", "drafted"),
    "share": ("count", "of"),
    "slow_decode_share": ("slow_decode", "delivered_outside_poc"),
    "slow_chunk_share": ("slow_chunk", "delivered_outside_poc"),
    "protocol_invalid_share": ("protocol_invalid", "assigned_nonces"),
    "protocol_misses_share": ("protocol_misses", "assigned_nonces"),
}


def named_intervals(stats: dict) -> list[dict]:
    """The interval descriptions of a table's stats: ``interval`` itself, or one per rate under it."""
    found = stats.get("interval")
    if not isinstance(found, dict):
        return []
    return [found] if "interval" in found else [v for v in found.values() if isinstance(v, dict)]


def assert_wilson_on_every_rate(result: EvidenceResult) -> int:
    """Every rate column has interval columns that hold statsmodels' Wilson 95% interval of its own counts,
    and the table's stats name that interval (method and level). Returns the number of intervals checked."""
    from statsmodels.stats.proportion import proportion_confint

    from pipeline.output.render.text import is_rate_column, rate_intervals

    schema = result.rows.schema
    rates = [name for name, dtype in schema.items() if is_rate_column(name, dtype)]
    pairs = rate_intervals(schema)
    assert set(pairs) == set(rates), f"{result.evidence}: rates without an interval: {set(rates) - set(pairs)}"
    named = {tuple(i["columns"]): i for i in named_intervals(result.stats)}
    checked = 0
    for rate in rates:
        low, high = pairs[rate]
        interval = named.get((low, high))
        assert interval is not None, f"{result.evidence}: {rate} ({low}, {high}) is not named in stats.interval"
        assert (interval["interval"], interval["level"]) == ("Wilson score", 0.95)
        part, whole = RATE_COUNTS[rate]
        for row in result.rows.iter_rows(named=True):
            k, n = row[part], row[whole]
            if not n or row.get("measure", "").endswith("_tokens"):  # token sums are not parts of a whole
                assert row[rate] is None and row[low] is None and row[high] is None
                continue
            assert row[rate] == pytest.approx(k / n, rel=1e-12)
            expected = proportion_confint(k, n, alpha=0.05, method="wilson")
            assert (row[low], row[high]) == pytest.approx(tuple(map(float, expected)), rel=1e-12, abs=1e-15)
            checked += 1
    return checked


@pytest.mark.parametrize(
    "name, options",
    [
        ("epoch-summary", {"denominators": True}),
        ("timeline", {"epoch": 3}),
        ("peer-invalidation", {"by_escrow": True}),
        ("peer-invalidation", {"epoch": 3, "by_build": True}),
        ("validators", {}),
        ("votes-by-build", {}),
        ("tracker", {}),
        ("tracker", {"epoch": 3, "compare": 2}),
        ("tracker", {"all_participants": True}),
        ("answers-by-sampling", {"detail": True}),
        ("similarity", {}),
    ],
)
def test_every_rate_carries_a_named_wilson_interval_as_statsmodels_computes_it(warehouse, name, options):
    result = run(warehouse, name, **options)
    assert assert_wilson_on_every_rate(result) > 0
    text = render(result, "markdown")
    assert "Wilson score 95% interval of" in text


@pytest.mark.parametrize("name", ["acceptance", "similarity", "throughput", "stability", "poc"])
def test_every_rate_of_the_log_tables_carries_a_named_wilson_interval(logs, name):
    result = compute(name, logs, host=HOST, command=f"gonka-evidence evidence {name}")
    assert result.rows.height > 0
    assert_wilson_on_every_rate(result)


def test_a_tracker_flag_counted_on_more_answers_than_delivered_has_a_share_but_no_interval_or_test():
    from pipeline.evidence.tables.tracker import SHARES, _compare, _with_share_interval

    rows = pl.DataFrame(
        {
            "epoch": [3, 2],
            "slow_decode": [5, 1],
            "slow_chunk": [1, 2],
            "delivered_outside_poc": [4, 10],
            "protocol_invalid": [2, 3],
            "protocol_misses": [0, 1],
            "assigned_nonces": [40, 50],
        }
    )
    rows = rows.with_columns((pl.col(part) / pl.col(whole)).alias(share) for share, (part, whole) in SHARES.items())
    for share, (part, whole) in SHARES.items():
        rows = _with_share_interval(rows, share, part, whole)
    first, second = rows.row(0, named=True), rows.row(1, named=True)
    assert (
        first["slow_decode_share"] == 1.25
        and first["slow_decode_ci_low"] is None
        and first["slow_decode_ci_high"] is None
    )
    from statsmodels.stats.proportion import proportion_confint

    assert (second["slow_decode_ci_low"], second["slow_decode_ci_high"]) == pytest.approx(
        tuple(map(float, proportion_confint(1, 10, method="wilson"))), rel=1e-12
    )
    compare = _compare(rows, 3, 2)
    assert "slow_decode_share" not in compare and set(compare) == {
        "slow_chunk_share",
        "protocol_invalid_share",
        "protocol_misses_share",
    }
