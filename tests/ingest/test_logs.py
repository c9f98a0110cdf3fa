"""Engine/validator logs, /metrics scrapes and PoC results: parsing, idempotent ingest,
public views and the acceptance / stability / similarity / poc evidence tables, every number
checked against the log generator's truth (pipeline/samples/logs.py)."""

from __future__ import annotations

import datetime as dt
import statistics
from pathlib import Path

import polars as pl
import pytest
from scipy import stats as scipy_stats
from typer.testing import CliRunner

from pipeline.core.address import sample_address
from pipeline.evidence import compute
from pipeline.evidence.stats import wilson_interval
from pipeline.ingest.builds import load_builds
from pipeline.ingest.kinds import detect_kind
from pipeline.ingest.logs import ingest_logs
from pipeline.output.render import render
from pipeline.samples.logs import HOST, SIMILARITY_THRESHOLD, write_log_samples
from pipeline.sources.logs.files import expand
from pipeline.sources.logs.metrics import is_scrape, read_scrape
from pipeline.warehouse.database import fetch_frame, open_for_write

VALIDATOR = sample_address("vdat0r")  # a made-up validator of its own validator log

UTC = dt.UTC


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    root = tmp_path_factory.mktemp("log-samples")
    return root, write_log_samples(root)


def _parts(root: Path) -> list[Path]:
    return [root / "vllm", root / "metrics", root / "dapi.log", root / "poc"]


@pytest.fixture(scope="module")
def loaded(samples, tmp_path_factory):
    root, truth = samples
    warehouse = tmp_path_factory.mktemp("log-wh") / "warehouse.duckdb"
    con = open_for_write(warehouse)
    load_builds(con, truth.files["builds"])
    first = ingest_logs(con, _parts(root), host=HOST)
    yield con, truth, first, warehouse
    con.close()


def _ev(con, name, **kw):
    return compute(name, con, host=HOST, command=f"gonka-evidence evidence {name}", **kw)


# -- parsing ---------------------------------------------------------------------------------


# the record rules (MAL semantics, preemptions by version): tests/test_vllm_log_grammar.py


def test_kind_detection(samples):
    root, _ = samples
    kinds = {f.path.name: detect_kind(f) for f in expand(_parts(root))}
    assert kinds["vllm.log.1.gz"] == kinds["vllm.log"] == kinds["vllm-b.log"] == "vllm"
    assert kinds["dapi.log"] == "validator"
    assert kinds["results.json"] == kinds["validate_report.txt"] == "poc"
    assert kinds["scrape-00.prom"] == "metrics"


# -- ingest and views --------------------------------------------------------------------------


def test_views_hold_every_line_once(loaded):
    con, truth, first, _ = loaded
    assert first.rows["log_spec_decode"] == truth.spec_lines
    assert first.rows["log_engine_stats"] == truth.stats_lines
    events = fetch_frame(con, f"SELECT kind, count(*) AS n FROM engine_events WHERE host = '{HOST}' GROUP BY kind")
    assert dict(events.iter_rows()) == truth.events
    windows = fetch_frame(
        con,
        "SELECT build, source, count(*) AS n, sum(drafts)::BIGINT AS drafts, "
        "sum(drafted)::BIGINT AS drafted, sum(accepted)::BIGINT AS accepted "
        "FROM spec_decode_windows GROUP BY ALL ORDER BY build",
    )
    for row in windows.iter_rows(named=True):
        t = truth.acceptance[row["build"]]
        assert (row["source"], row["n"], row["drafts"], row["drafted"], row["accepted"]) == (
            t["source"],
            t["windows"],
            t["drafts"],
            t["drafted"],
            t["accepted"],
        )
    # 0.8.5 lines are normalised: every window's MAL is 1 + accepted/drafts
    mal = fetch_frame(
        con,
        "SELECT count(*) AS bad FROM spec_decode_windows "
        "WHERE abs(mean_acceptance_length - (1 + accepted / drafts)) > 1e-9",
    )
    assert mal["bad"][0] == 0
    assert (
        fetch_frame(con, "SELECT count(*) AS n FROM spec_decode_windows WHERE mal_semantics = 'no_plus1'")["n"][0] > 0
    )
    # DEBUG idle lines are kept, with their level
    assert fetch_frame(con, "SELECT count(*) AS n FROM engine_stats WHERE level = 'DEBUG'")["n"][0] == 40


def test_unknown_format_is_unparsed_not_fatal(loaded):
    con, truth, first, _ = loaded
    assert first.unparsed == truth.unparsed == 2
    reasons = fetch_frame(con, "SELECT table_name, reason FROM quarantine ORDER BY table_name")
    assert reasons["table_name"].to_list() == ["validator_log", "vllm_log"]
    assert "2027-01-05T10:00:00.123Z | INFO" in reasons["reason"][1]
    run = fetch_frame(con, f"SELECT status FROM ingest_runs WHERE run_id = '{first.run_id}'")
    assert run["status"][0] == "ok"


def test_year_rollover_and_rotation(loaded):
    con, _, _, _ = loaded
    days = fetch_frame(
        con, "SELECT DISTINCT CAST(\"at\" AS DATE) AS day FROM engine_stats WHERE source = 'log' ORDER BY 1"
    )
    assert days["day"].to_list() == [
        dt.date(2025, 12, 31),
        dt.date(2026, 1, 1),
        dt.date(2026, 1, 2),
        dt.date(2026, 1, 3),
    ]
    fatal = fetch_frame(con, 'SELECT "at", detail FROM engine_events WHERE kind = \'fatal\' ORDER BY "at"')
    assert fatal["at"][0].year == 2026 and "OutOfMemoryError" in fatal["detail"][0]


def test_reingest_rotated_gzipped_and_longer_adds_nothing(loaded, samples):
    con, _, _, _ = loaded
    root, truth = samples
    before = {
        t: fetch_frame(con, f"SELECT count(*) AS n FROM {t}")["n"][0]
        for t in (
            "log_spec_decode",
            "log_engine_stats",
            "log_engine_events",
            "metric_samples",
            "log_validation_scores",
            "poc_results_t",
            "quarantine",
        )
    }
    again = ingest_logs(con, [*_parts(root), truth.files["full_a"]], host=HOST)
    assert set(again.rows.values()) == {0}
    after = {t: fetch_frame(con, f"SELECT count(*) AS n FROM {t}")["n"][0] for t in before}
    assert after == before


def test_year_option(samples, tmp_path):
    root, truth = samples
    con = open_for_write(tmp_path / "w.duckdb")
    ingest_logs(con, [truth.files["live"]], host=HOST, kind="vllm", year=2030)
    years = fetch_frame(con, 'SELECT DISTINCT year("at") AS y FROM engine_stats ORDER BY 1')["y"].to_list()
    con.close()
    assert years == [2030, 2031]  # --year is the first line's year; the file crosses a new year


def test_reingest_with_another_year_or_timezone_replaces(samples, tmp_path):
    """A wrong --year (or --timezone) is undone by reading the file again: its records are replaced (keyed by
    file and line), not kept beside the new ones or ignored, and the summary says how many."""
    root, truth = samples
    con = open_for_write(tmp_path / "w.duckdb")
    first = ingest_logs(con, [truth.files["live"]], host=HOST, kind="vllm", year=2030)
    counts = {t: n for t, n in first.rows.items()}
    assert first.replaced == 0 and counts["log_engine_stats"] > 0

    def table(sql):
        return fetch_frame(con, sql)

    again = ingest_logs(con, [truth.files["live"]], host=HOST, kind="vllm", year=2025)
    assert set(again.rows.values()) == {0}
    assert again.replaced == counts["log_spec_decode"] + counts["log_engine_stats"]
    for t, n in counts.items():
        assert table(f"SELECT count(*) AS n FROM {t}")["n"][0] == n
    years = table('SELECT DISTINCT year("at") AS y FROM log_engine_stats ORDER BY 1')["y"].to_list()
    assert years == [2025, 2026]
    before = table('SELECT line, "at" FROM log_engine_stats ORDER BY line')
    covered = table("SELECT first_at, last_at FROM log_files WHERE kind = 'vllm'")
    shifted = ingest_logs(con, [truth.files["live"]], host=HOST, kind="vllm", year=2025, timezone="+02:00")
    after = table('SELECT line, "at" FROM log_engine_stats ORDER BY line')
    assert shifted.replaced == again.replaced and shifted.timezone == "+02:00"
    assert after["line"].to_list() == before["line"].to_list()
    assert (before["at"] - after["at"]).unique().to_list() == [dt.timedelta(hours=2)]
    coverage = table("SELECT first_at, last_at FROM log_files WHERE kind = 'vllm'")
    assert coverage.height == 1  # the file's coverage moved with its records
    assert covered.row(0)[0] - coverage.row(0)[0] == covered.row(0)[1] - coverage.row(0)[1] == dt.timedelta(hours=2)
    label = table("SELECT label FROM ingest_runs ORDER BY started_at DESC LIMIT 1")["label"][0]
    assert label == "timezone +02:00"  # the zone the times were read in, shown in the provenance footer
    con.close()


def test_two_copies_of_a_log_in_one_run_count_once(samples, tmp_path):
    """A log and its gzipped twin, and a shorter copy of it, in one run: each record once, and a longer copy
    read after a shorter one adds just its new lines."""
    import gzip

    root, truth = samples
    data = truth.files["live"].read_bytes()
    lines = data.splitlines(keepends=True)
    folder = tmp_path / "copies"
    folder.mkdir()
    (folder / "a-short.log").write_bytes(b"".join(lines[:60]))
    (folder / "b-full.log.gz").write_bytes(gzip.compress(data))
    (folder / "c-full.log").write_bytes(data)
    con = open_for_write(tmp_path / "copies.duckdb")
    both = ingest_logs(con, [folder], host=HOST, kind="vllm", year=2025)
    alone = open_for_write(tmp_path / "alone.duckdb")
    one = ingest_logs(alone, [truth.files["live"]], host=HOST, kind="vllm", year=2025)
    for table in ("log_spec_decode", "log_engine_stats", "log_engine_events"):
        n = fetch_frame(
            con,
            f"SELECT count(*) AS n, count(DISTINCT (record_key, {'kind' if 'events' in table else 1})) AS k "
            f"FROM {table}",
        ).row(0)
        assert n == (one.rows[table], one.rows[table]) and both.rows[table] == one.rows[table], table
    assert both.replaced == 0
    con.close()
    alone.close()


def test_timezone_names_and_offsets(samples, tmp_path):
    """An IANA zone applies its daylight saving; a bad zone is a one-line error naming it."""
    from pipeline.sources.store.base import SourceError

    root, truth = samples
    con = open_for_write(tmp_path / "tz.duckdb")
    utc = ingest_logs(con, [truth.files["live"]], host=HOST, kind="vllm", year=2025)
    at_utc = fetch_frame(con, 'SELECT line, "at" FROM log_engine_stats ORDER BY line')
    ingest_logs(con, [truth.files["live"]], host=HOST, kind="vllm", year=2025, timezone="Europe/Berlin")
    at_berlin = fetch_frame(con, 'SELECT line, "at" FROM log_engine_stats ORDER BY line')
    assert utc.timezone == "UTC"
    assert (at_utc["at"] - at_berlin["at"]).unique().to_list() == [dt.timedelta(hours=1)]  # CET in winter
    with pytest.raises(SourceError, match="unknown time zone 'Mars/Olympus'"):
        ingest_logs(con, [truth.files["live"]], host=HOST, kind="vllm", timezone="Mars/Olympus")
    con.close()


def test_wrong_kind_is_reported_not_silent(samples, tmp_path):
    """A vLLM log read as a validator log (or the reverse, or a file of no known format) recognises nothing:
    the summary names the file and the kind, instead of a silent 0 rows."""
    root, truth = samples
    con = open_for_write(tmp_path / "kind.duckdb")
    as_validator = ingest_logs(con, [truth.files["live"]], host=HOST, kind="validator")
    assert as_validator.unrecognised == [(str(truth.files["live"]), "validator")]
    as_vllm = ingest_logs(con, [root / "dapi.log"], host=HOST, kind="vllm")
    assert as_vllm.unrecognised == [(str(root / "dapi.log"), "vllm")] and as_vllm.unparsed > 0
    other = tmp_path / "notes.txt"
    other.write_text("shopping list\nmilk\n")
    detected = ingest_logs(con, [other], host=HOST)
    assert detected.unrecognised == [(str(other), "vllm")]
    right = ingest_logs(con, [truth.files["live"]], host=HOST)
    assert right.unrecognised == []
    con.close()


def test_metrics_counter_reset(loaded):
    con, _, _, _ = loaded
    resets = fetch_frame(
        con,
        "SELECT family, count(*) FILTER (reset) AS resets, count(*) AS n FROM metric_increases "
        "GROUP BY family, position",
    )
    assert set(resets["resets"].to_list()) == {1} and set(resets["n"].to_list()) == {6}
    metric_stats = fetch_frame(con, "SELECT sum(preemptions)::BIGINT AS p FROM engine_stats WHERE source = 'metrics'")
    assert metric_stats["p"][0] == 1 + 0 + 1 + 0 + 1 + 0  # scrapes 1..6 add scrape % 2; scrape 4 restarts from 0


def test_metrics_reader_reads_a_scrape_as_its_time(tmp_path):
    """/metrics scrapes: recognised by their `vllm:` series, read into metric_samples rows of the host; the
    file's identity is the scrape's time (the newest sample timestamp), a sample that is not a number is unparsed."""
    scrape = tmp_path / "scrape.prom"
    scrape.write_text(
        "# HELP vllm:num_preemptions_total Preemptions.\n"
        "# TYPE vllm:num_preemptions_total counter\n"
        'vllm:num_preemptions_total{engine="0",model_name="m"} 3.0 1767225600000\n'
        'vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.25 1767225601000\n'
        'vllm:num_requests_running{engine="0"} many\n'
        "process_cpu_seconds_total 12.0\n"
    )
    (file,) = expand([scrape])
    assert is_scrape(file.head()) and not is_scrape('time=2026-01-01T00:00:00Z level=INFO msg="x"\n')
    assert detect_kind(file) == "metrics"
    read = read_scrape(file, HOST)
    at = dt.datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC)
    assert read.file_id == f"scrape@{at.isoformat()}" and (read.first, read.last, read.lines) == (at, at, 6)
    assert read.rows.to_dicts() == [
        {"host": HOST, "scraped_at": at, "family": "vllm:num_preemptions_total", "engine": "0",
         "model_name": "m", "position": "", "value": 3.0},
        {"host": HOST, "scraped_at": at, "family": "vllm:kv_cache_usage_perc", "engine": "0",
         "model_name": "m", "position": "", "value": 0.25},
    ]  # fmt: skip
    assert read.unparsed == [(5, "line 5", 'vllm:num_requests_running{engine="0"} many')]


# -- evidence tables -----------------------------------------------------------------------------


def test_acceptance_exact(loaded):
    con, truth, _, _ = loaded
    result = _ev(con, "acceptance")
    rows = {r["build"]: r for r in result.rows.iter_rows(named=True)}
    assert list(rows) == ["A", "B", "C"]
    for build, t in truth.acceptance.items():
        r = rows[build]
        assert (r["source"], r["windows"], r["drafts"], r["drafted"], r["accepted"]) == (
            t["source"],
            t["windows"],
            t["drafts"],
            t["drafted"],
            t["accepted"],
        )
        assert r["mean_acceptance_length"] == pytest.approx(1 + t["accepted"] / t["drafts"], rel=1e-12)
        assert r["per_position"] == pytest.approx([p / t["drafts"] for p in t["pos"]], rel=1e-12)
        assert r["acceptance_rate"] == pytest.approx(t["accepted"] / t["drafted"], rel=1e-12)
        low, high = wilson_interval(t["accepted"], t["drafted"])
        assert (r["ci_low"], r["ci_high"]) == pytest.approx((low, high))
        dist = r["length_distribution"]
        assert len(dist) == 6 and sum(dist) == pytest.approx(1.0)
        # the identity MAL = 1 + Σ r_i (acceptance is prefix-wise)
        assert r["mean_acceptance_length"] == pytest.approx(1 + sum(r["per_position"]), rel=1e-12)
    assert result.stats["windows_without_drafts"] == 0
    assert "| A | log | 85 |" in render(result, "markdown")


def test_acceptance_window(loaded):
    con, truth, _, _ = loaded
    result = _ev(con, "acceptance", since="2026-01-04T00:00:00Z", until="2026-01-05T00:00:00Z")
    assert result.rows["build"].to_list() == ["C"] and result.rows["drafts"][0] == truth.acceptance["C"]["drafts"]


def test_stability_exact(loaded):
    con, truth, _, _ = loaded
    # Build A's log read whole as well as rotated (it adds no record twice): its observed time is then the
    # truth's one span, not the rotated file's and the live file's with the 10 s between them left out.
    ingest_logs(con, [truth.files["full_a"]], host=HOST)
    result = _ev(con, "stability")
    rows = {r["build"]: r for r in result.rows.iter_rows(named=True)}
    assert list(rows) == ["A", "B"]
    spans = {"A": truth.spans[0], "B": truth.spans[1]}
    for build, t in truth.stability.items():
        r = rows[build]
        assert (r["engine_deaths"], r["ooms"], r["restarts"]) == (t["engine_deaths"], t["ooms"], t["restarts"])
        assert r["ready_seconds_median"] == statistics.median(t["ready"])
        assert r["ready_seconds_max"] == max(t["ready"])
        assert r["preemptions"] == t["preemptions"]
        assert r["max_kv_cache_usage"] == pytest.approx(t["max_kv"])
        start, end = spans[build]
        assert r["hours_observed"] == pytest.approx((end - start).total_seconds() / 3600)
    assert rows["A"]["preemptions"] is None  # 0.8.5/0.9.1 lines do not report preemptions


def test_stability_by_day(loaded):
    con, truth, _, _ = loaded
    result = _ev(con, "stability", by="day")
    b = result.rows.filter(pl.col("build") == "B")
    assert b["day"].to_list() == [dt.date(2026, 1, 2), dt.date(2026, 1, 3)]
    end = truth.spans[1][1]
    assert b["hours_observed"].to_list() == pytest.approx(
        [15.0, (end - dt.datetime(2026, 1, 3, tzinfo=UTC)).total_seconds() / 3600]
    )
    assert b["preemptions"].sum() == truth.stability["B"]["preemptions"]
    assert b["preemptions"][1] == 3 and b["restarts"].to_list() == [2, 0]
    with pytest.raises(Exception, match="--by"):
        _ev(con, "stability", by="week")


def test_similarity_exact(loaded):
    con, truth, _, _ = loaded
    result = _ev(con, "similarity")
    scores = result.rows.filter(pl.col("source") == "scores")
    expected = {}
    for s in truth.scores:
        expected.setdefault((s["executor_build"], s["validator_build"]), []).append(s)
    assert scores.height == len(expected)
    for r in scores.iter_rows(named=True):
        cell = expected[(r["answers_build"], r["validator_build"])]
        values = [s["value"] for s in cell]
        passed = sum(s["passed"] for s in cell)
        assert (r["n"], r["judged"], r["passed"]) == (len(cell), len(cell), passed)
        assert r["min"] == min(values) and r["median"] == pytest.approx(statistics.median(values))
        assert r["passed_share"] == pytest.approx(passed / len(cell))
    threshold = fetch_frame(con, "SELECT DISTINCT threshold FROM validation_scores")["threshold"].to_list()
    assert threshold == [SIMILARITY_THRESHOLD]


def test_similarity_threshold_parameter_for_a_model_without_a_known_one(tmp_path):
    """The DeepSeek-V4-Flash validation threshold is unknown (docs/sources.md, validator logs): without
    --threshold its scores are not judged; with it a value passes when strictly above it."""
    from pipeline.evidence import EvidenceError

    lines = [
        f'time=2026-10-24T1{i}:00:00.000Z level=INFO msg="Cosine similarity validation result" '
        f"subsystem=Validation cosineSimValue={v} inferenceId={100 + i} executor=gonka1peer "
        "model=deepseek-ai/DeepSeek-V4-Flash"
        for i, v in enumerate((0.95, 0.97, 0.99, 0.90))
    ]
    (tmp_path / "dapi.log").write_text("\n".join(lines) + "\n")
    con = open_for_write(tmp_path / "w.duckdb")
    ingest_logs(con, [tmp_path / "dapi.log"], host=VALIDATOR, kind="validator")
    plain = compute("similarity", con, host=VALIDATOR, command="x").rows.row(0, named=True)
    assert (plain["n"], plain["judged"], plain["passed"], plain["passed_share"]) == (4, 0, 0, None)
    given = compute("similarity", con, host=VALIDATOR, command="x", threshold=0.95)
    row = given.rows.row(0, named=True)
    assert (row["n"], row["judged"], row["passed"], row["passed_share"]) == (4, 4, 2, 0.5)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(wilson_interval(2, 4))
    assert given.params["threshold"] == 0.95
    with pytest.raises(EvidenceError, match="--threshold"):
        compute("similarity", con, host=VALIDATOR, command="x", threshold=1.5)
    con.close()


def test_poc_exact(loaded):
    con, _, _, _ = loaded
    rows = {r["event"]: r for r in _ev(con, "poc").rows.iter_rows(named=True)}
    e = rows["1200"]
    # Binomial tail: at n = 200, p0 = 0.1, α = 0.01 the smallest fraud count is 31 — so 30 passes, 31 fails
    assert (e["validators"], e["invalid"], e["nonces"], e["mismatches"]) == (3, 1, 600, 73)
    assert e["p_value"] == pytest.approx(scipy_stats.binom.sf(72, 600, 0.1))
    assert e["verdict"] == "accepted" and e["reported_disagrees"] == 1
    assert rows["1300"]["p_value"] == 1.0 and rows["1300"]["invalid"] == 0
    views = fetch_frame(
        con,
        "SELECT validator, n_mismatch, fraud, p_mismatch, cutoff, params_source FROM poc_results "
        "WHERE event = '1200' ORDER BY validator",
    )
    assert views["fraud"].to_list() == [False, True, False]
    assert views["params_source"].unique().to_list() == ["result stat_test"]
    golden = fetch_frame(con, "SELECT p_value, params_source FROM poc_results WHERE n_total = 1000")
    assert golden["p_value"][0] == pytest.approx(scipy_stats.binom.sf(11, 1000, 0.1))
    assert golden["params_source"][0].startswith("default")


def test_views_have_comments(loaded):
    con, _, _, _ = loaded
    views = [
        "spec_decode_windows",
        "engine_stats",
        "engine_events",
        "validation_scores",
        "poc_results",
        "metric_increases",
    ]
    comments = fetch_frame(con, "SELECT view_name, comment FROM duckdb_views() WHERE NOT internal")
    described = {r["view_name"]: r["comment"] for r in comments.iter_rows(named=True)}
    for view in views:
        assert described.get(view), view


def test_charts_svg_and_png(loaded, tmp_path):
    from pipeline.output.render.charts import acceptance_chart, engine_events_chart, save_chart

    con, _, _, _ = loaded
    paths = save_chart(acceptance_chart(_ev(con, "acceptance")), tmp_path / "acceptance")
    paths += save_chart(engine_events_chart(con, HOST), tmp_path / "events")
    for path in paths:
        data = path.read_bytes()
        assert data.startswith(b"\x89PNG") if path.suffix == ".png" else b"<svg" in data[:500]


def test_cli_ingest_logs(samples, tmp_path):
    from pipeline.cli.app import app

    root, _ = samples
    runner = CliRunner()
    warehouse = tmp_path / "cli.duckdb"
    result = runner.invoke(app, ["ingest-logs", str(root / "vllm"), "--host", HOST, "--warehouse", str(warehouse)])
    assert result.exit_code == 0, result.output
    assert "log_spec_decode: 215 new rows" in result.output and "unparsed lines: 1" in result.output
    strict = runner.invoke(
        app, ["ingest-logs", str(root / "vllm"), "--host", HOST, "--warehouse", str(warehouse), "--strict"]
    )
    assert strict.exit_code == 3  # rows quarantined with --strict (2 is a usage error)
    missing = runner.invoke(app, ["ingest-logs", str(tmp_path / "nope"), "--host", HOST, "--warehouse", str(warehouse)])
    assert missing.exit_code == 1 and "no such file" in missing.output and "Traceback" not in missing.output
    bad_kind = runner.invoke(
        app, ["ingest-logs", str(root / "vllm"), "--host", HOST, "--kind", "x", "--warehouse", str(warehouse)]
    )
    assert bad_kind.exit_code == 1
    live = str(root / "vllm" / "vllm.log")
    wrong = runner.invoke(
        app, ["ingest-logs", live, "--host", HOST, "--kind", "validator", "--warehouse", str(warehouse)]
    )
    assert wrong.exit_code == 0
    assert f"warning: {live}: nothing recognised as a validator log (wrong --kind?)" in wrong.output
    assert "files with nothing recognised: 1" in wrong.output and "Traceback" not in wrong.output
    wrong_strict = runner.invoke(
        app, ["ingest-logs", live, "--host", HOST, "--kind", "validator", "--strict", "--warehouse", str(warehouse)]
    )
    assert wrong_strict.exit_code == 3  # quarantined or unrecognised input with --strict
    shifted = runner.invoke(
        app, ["ingest-logs", str(root / "vllm"), "--host", HOST, "--timezone", "UTC+1", "--warehouse", str(warehouse)]
    )
    assert shifted.exit_code == 0 and "time zone +01:00" in shifted.output
    assert "replaced " in shifted.output and "log_spec_decode: 0 new rows" in shifted.output
    bad_zone = runner.invoke(
        app, ["ingest-logs", live, "--host", HOST, "--timezone", "Nowhere/Land", "--warehouse", str(warehouse)]
    )
    assert bad_zone.exit_code == 1 and "unknown time zone 'Nowhere/Land'" in bad_zone.output


# -- streaming parser: chunk boundaries and line-level traps (bench/BENCHMARKS.md, log parsing) -----------

EDGE_LOG = b"".join(
    [
        b"INFO:     Started server process [1]\n",  # uvicorn before any timed record: skipped
        b"  orphan line before any record\n",  # unparsed
        b"INFO 12-31 23:59:50 [api_server.py:1] vLLM API server version 0.8.5\n",
        b"\n\n   \n",  # blank lines: counted as lines, nothing else
        (
            b"myprefix INFO 12-31 23:59:55 [loggers.py:118] Avg prompt throughput: 1.0 tokens/s, "
            b"Avg generation throughput: 2.0 tokens/s, Running: 3 reqs, Waiting: 4 reqs, GPU KV cache usage: 47.5%, "
            b"Prefix cache hit rate: 10.0%\r\n"
        ),
        # the same line twice (a lone \r ends the first): keys :0 and :1
        (
            b"INFO 01-01 00:00:05 [metrics.py:86] SpecDecoding metrics: Draft acceptance rate: 52.4%, "
            b"Mean acceptance length: 2.62, Accepted: 1310 tokens, Drafted: 2500 tokens, "
            b"Per-position acceptance rate: 0.800, 0.700, 0.560, 0.340, 0.220\r"
        ),
        (
            b"INFO 01-01 00:00:05 [metrics.py:86] SpecDecoding metrics: Draft acceptance rate: 52.4%, "
            b"Mean acceptance length: 2.62, Accepted: 1310 tokens, Drafted: 2500 tokens, "
            b"Per-position acceptance rate: 0.800, 0.700, 0.560, 0.340, 0.220\n"
        ),
        b"ERROR 01-01 00:00:06 [core.py:700] EngineCore encountered a fatal error.\n",
        b"some raw line, folded because the record is an ERROR\n",
        b"\x1b[1;36m(EngineCore_DP0 pid=7)\x1b[0;0m Traceback (most recent call last):\n",
        b'  File "x.py", line 1\n',
        b"torch.OutOfMemoryError: CUDA out of memory. \xff\xfe undecodable bytes\n",
        b"INFO 01-01 00:00:07 [x.py:1] plain info\n",
        b"not a traceback line: unparsed\n",
        b"ValueError: a traceback line, folded\n",
        b"folded too, the record already has folded lines\n",
        b"INFO:     Application startup complete.\n",
        b"INFO 01-01 00:00:08 [x.py:1] Avg prompt throughput: bad\n",  # unparsed stats record
        b"INFO 01-01 00:00:10 [x.py:1] Process EngineCore_0 (PID: 5) died with exit code 1\n",
        b"CRITICAL 01-01 00:00:13 [x.py:1] PoC generation crashed: boom\n",
    ]
)


def test_streaming_parser_chunk_boundaries(tmp_path):
    from pipeline.sources.logs.files import LogFile
    from pipeline.sources.logs.vllm import parse_vllm_log

    path = tmp_path / "edge.log"
    path.write_bytes(EDGE_LOG * 3 + b"INFO 01-02 00:00:00 [x.py:1] PoC stopped: 1 nonces")  # no final newline
    file = LogFile(path, dt.datetime(2027, 1, 2, tzinfo=UTC))
    whole = parse_vllm_log(file, None)
    # numbers from the line-by-line parser this streaming one replaced (same keys, rows and counts)
    assert (whole.lines, whole.records, len(whole.spec), len(whole.stats), len(whole.unparsed)) == (67, 33, 6, 3, 7)
    assert len({r["line"] for r in whole.spec}) == 6  # the same record twice is two records, on their own lines
    kinds = sorted(e["kind"] for e in whole.events)
    # the API server's version line is the server's launch (an event since the restart-by-launch rule)
    assert kinds == sorted(["launch", "fatal", "oom", "ready", "worker_died", "poc_stop"] * 3 + ["poc_stop"])
    fatal = next(e for e in whole.events if e["kind"] == "fatal")
    assert fatal["detail"].endswith("— torch.OutOfMemoryError: CUDA out of memory. \ufffd\ufffd undecodable bytes")
    assert whole.stats[0]["kv_cache_usage"] == 47.5 / 100 and whole.stats[0]["preemptions"] is None
    assert whole.spec[0]["mal_semantics"] == "no_plus1" and whole.spec[0]["drafts"] == 500
    assert (whole.first_at.year, whole.last_at.year) == (2024, 2027)  # three rollovers; file time = last record
    for chunk in (64, 1000):  # a chunk boundary inside every record and traceback
        part = parse_vllm_log(file, None, chunk_bytes=chunk)
        assert (part.lines, part.records, part.first_at, part.last_at) == (
            whole.lines,
            whole.records,
            whole.first_at,
            whole.last_at,
        )
        for name in ("spec", "stats", "events"):
            assert sorted(map(repr, getattr(part, name))) == sorted(map(repr, getattr(whole, name))), name
        assert sorted(part.unparsed) == sorted(whole.unparsed)
