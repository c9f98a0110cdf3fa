"""Text that comes from outside is data, never markup, never an event.

Build labels, source labels, file names, ids and what a log line quotes from a client reach the terminal,
Markdown, CSV, JSON and the run's log: escaped for each, never crashing a renderer, never acting on the
terminal, and never parsed as an engine event. A fuzz test over every text field of an evidence table and
every output format holds it."""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import replace

import polars as pl
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pipeline.core.text import HIDDEN_CHARACTERS, MAX_LABEL_CHARS
from pipeline.output.render import render
from tests.output.render.test_render import votes_result

HIDDEN = re.compile(HIDDEN_CHARACTERS)
HOSTILE = [
    "\x1b[31mred\x1b[0m",  # an ANSI colour
    "\x1b]0;title\x07",  # a terminal title
    "a\rb",  # a carriage return overwriting the line
    "x | y\n| z |",  # a table pipe and a new line
    "[bold]b[/bold] [link=https://e.x]l[/link]",  # Rich markup
    "<script>alert(1)</script>",
    '=HYPERLINK("https://e.x","x")',  # a spreadsheet formula
    "+1+2",
    "@SUM(A1)",
    "-2+3",
    "\u202eevil",  # a bidirectional override
    "\u0085\u009b31m",  # C1 controls (CSI)
]


def _result(text: str):
    """The votes table with `text` in every text field that comes from outside: a build label, a
    validator address, a source label, a run id and the command."""
    base = votes_result()
    rows = base.rows.with_columns(
        build=pl.Series([text, "V2"]), validators=pl.Series([[text, "gonka1y"], None], dtype=pl.List(pl.String))
    )
    prov = replace(
        base.provenance,
        sources=[{**source, "label": text, "source_id": text} for source in base.provenance.sources],
        run_ids=[text],
        command=f"gonka-evidence evidence votes-by-build --host {text}",
    )
    return replace(base, rows=rows, provenance=prov)


def _check_every_format(text: str) -> None:
    result = _result(text)
    benign = _result("plain")
    markdown = render(result, "markdown")
    assert not HIDDEN.search(markdown)
    assert markdown.count("\n") == render(benign, "markdown").count("\n")  # no line added or merged
    (row,) = [line for line in markdown.splitlines() if line.endswith("| 2026-10-25T23:06:00Z |")]
    assert len(re.findall(r"(?<!\\)\|", row)) == 9  # the cells of the row, none added by the label

    table = render(result, "table")
    assert not HIDDEN.search(table)

    rows = list(csv.reader(io.StringIO(render(result, "csv"))))
    assert len(rows) == 3 and len({len(r) for r in rows}) == 1
    build = rows[1][0]
    # the label itself, or behind the one quote that guards a formula (a label may begin with a quote itself)
    assert build in (text, "'" + text) and not re.match(r"[=+@\t\r]", build)
    assert not re.match(r"-", build) or re.fullmatch(r"-\d+(\.\d+)?([eE][-+]?\d+)?", build)

    document = json.loads(render(result, "json"))  # JSON escapes what it must: the label comes back as given
    assert document["rows"][0]["build"] == text
    assert document["provenance"]["sources"][0]["label"] == text


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_labels_in_every_format(text):
    _check_every_format(text)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(min_size=1, max_size=40))
@example("\x1b[2J\x00")
@example("'")  # a label that begins with a quote of its own: the oracle once stripped it with the guard's
@example("\u2028")  # a line separator: a line break to editors and splitlines, shown as an escape
def test_fuzz_every_text_field_in_every_format(text):
    _check_every_format(text)


def test_the_terminal_lines_never_carry_a_control_character(capsys):
    """The run's log, notices and warnings: an ANSI sequence from a label or a file name is shown, never
    run by the terminal (`\\x1b`), and a carriage return cannot overwrite the line."""
    from pipeline.cli import console

    for text in HOSTILE:
        console.run_line(f"ingested {text}")
        console.info(f"label {text}")
        console.warning(f"file {text}")
    captured = capsys.readouterr()
    for stream in (captured.out, captured.err):
        assert not HIDDEN.search(stream.replace("\n", ""))
    assert "\\x1b[31mred" in captured.out
    console.run_line("ingested label\nwarehouse: updated")  # a label cannot forge a line of the log
    assert capsys.readouterr().out == "ingested label\\x0awarehouse: updated\n"


def test_a_prompt_quoting_vllms_errors_is_no_engine_event(tmp_path):
    """vLLM's request log quotes the client's prompt (vllm/entrypoints/logger.py, RequestLogger.log_inputs:
    "Received request %s: prompt: %r, …"; log_outputs: "Generated response %s%s: output: %r, …"). A prompt
    that quotes vLLM's own fatal or out-of-memory texts was read as the engine's fatal error and OOM."""
    from pipeline.sources.logs.files import LogFile
    from pipeline.sources.logs.vllm import parse_vllm_log

    quoted = "EngineCore encountered a fatal error. No available memory for the cache blocks."
    path = tmp_path / "vllm.log"
    path.write_text(
        "INFO 01-02 03:04:05 [api_server.py:1] vLLM API server version 0.8.5\n"
        f"INFO 01-02 03:04:06 [logger.py:39] Received request chatcmpl-1: prompt: '{quoted}', params: "
        "SamplingParams(n=1), prompt_token_ids: None, lora_request: None.\n"
        f"INFO 01-02 03:04:07 [logger.py:60] Generated response chatcmpl-1: output: '{quoted}', "
        "output_token_ids: None, finish_reason: stop\n"
        f"ERROR 01-02 03:04:08 [core.py:1] {quoted}\n",
        encoding="utf-8",
    )
    from datetime import UTC, datetime

    parsed = parse_vllm_log(LogFile(path, datetime(2026, 1, 2, tzinfo=UTC)), year=2026)
    lines = sorted({e["line"] for e in parsed.events})
    assert lines == [1, 4], parsed.events  # the launch and the engine's own fatal line, not the quotes


def test_absurd_labels_and_timelines_are_one_line_refusals(tmp_path):
    from pipeline.ingest.builds import MAX_ENTRIES, BuildsError, read_builds_document

    host = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"
    path = tmp_path / "builds.toml"
    path.write_text(
        f'[[builds]]\nhost = "{host}"\nlabel = "{"x" * 100_000}"\nsince = "2026-01-01T00:00:00Z"\n', encoding="utf-8"
    )
    with pytest.raises(BuildsError, match=f"a label of 100,000 characters; at most {MAX_LABEL_CHARS} are taken"):
        read_builds_document(path)
    entry = f'[[builds]]\nhost = "{host}"\nlabel = "b{{}}"\nsince = "2026-01-01T00:00:{{:02d}}Z"\n'
    path.write_text(
        "".join(entry.format(i, i % 60) for i in range(MAX_ENTRIES + 1)).replace("00:00:", "00:{}:"),
        encoding="utf-8",
    )
    with pytest.raises(BuildsError, match=f"{MAX_ENTRIES + 1:,} \\[\\[builds\\]\\] entries"):
        read_builds_document(path)


def test_an_absurd_source_label_is_refused_in_one_line(tmp_path):
    from pipeline.jobs.config import ConfigError, load_config

    cfg = tmp_path / "gonka-evidence.toml"
    cfg.write_text(f'[[sources]]\npath = "copy"\nlabel = "{"y" * 100_000}"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="a label of 100,000 characters"):
        load_config(cfg)


HOSTILE_BUILD_LABEL = '=HYPERLINK("x") \x1b[31mred\x1b[0m \uffff | <b>y</b>'
SAMPLES_HOST = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"  # focal host of data-samples/


def _samples_with_a_hostile_build_label(tmp_path):
    """The samples' warehouse (with their vLLM log) whose build `V2 + DSpark, raw_logprobs` is labelled
    `HOSTILE_BUILD_LABEL`."""
    from pipeline.core.paths import DATA_SAMPLES_DIR
    from tests.factories import data_samples_warehouse, load_builds_of

    warehouse = data_samples_warehouse(tmp_path / "w.duckdb", vllm_log_host=SAMPLES_HOST)
    builds = (DATA_SAMPLES_DIR / "builds.toml").read_text(encoding="utf-8")
    toml_label = json.dumps(HOSTILE_BUILD_LABEL)  # a TOML basic string, as JSON writes it here
    hostile = tmp_path / "builds.toml"
    hostile.write_text(builds.replace('"V2 + DSpark, raw_logprobs"', toml_label), encoding="utf-8")
    load_builds_of(warehouse, hostile)
    return warehouse


def _check_the_hostile_label_is_an_escape_everywhere(report) -> None:
    svgs = sorted((report / "charts").glob("*.svg"))
    assert svgs
    shown = [svg for svg in svgs if "\\x1b[31mred" in svg.read_text(encoding="utf-8")]
    assert shown, "the label is in a chart, as an escape"
    for page in [*svgs, report / "report.html", report / "report.md"]:
        text = page.read_text(encoding="utf-8")
        assert "\x1b" not in text and "\uffff" not in text and "<b>y" not in text, page


def test_a_hostile_build_label_in_the_charts_is_an_escape_in_every_chart_and_page(tmp_path):
    """A build label with an ANSI sequence (or U+FFFF) aborted `report` and `bundle` (exit 134): vl-convert
    panics on a character XML does not allow in the SVG text of a chart. `report epoch 3` in-process (a panic
    would abort pytest itself): every chart and page shows it as an escape, nothing of it acts on a terminal or
    a browser."""
    from tests.helpers import cli_in

    warehouse = _samples_with_a_hostile_build_label(tmp_path)
    done = cli_in(tmp_path, "report", "epoch", "3", "--host", SAMPLES_HOST, "--out", "out", "-w", str(warehouse))
    assert done.returncode == 0, done.stderr[-2000:]
    _check_the_hostile_label_is_an_escape_everywhere(tmp_path / "out" / "epoch-3")


# `report` in a process of its own (the crash was an abort, exit 134); stands in the default tier:
# tests/output/test_outside_text.py::test_a_hostile_build_label_in_the_charts_is_an_escape_in_every_chart_and_page
@pytest.mark.heavy
def test_a_hostile_build_label_in_the_charts_is_no_renderer_crash(tmp_path):
    """A build label with an ANSI sequence (or U+FFFF) aborted `report` and `bundle` (exit 134): vl-convert
    panics on a character XML does not allow in the SVG text of a chart. Now every chart and page shows it as
    an escape, and nothing of it acts on a terminal or a browser."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    host = SAMPLES_HOST
    warehouse = _samples_with_a_hostile_build_label(tmp_path)
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline.cli",
            "report",
            "epoch",
            "3",
            "--host",
            host,
            "--out",
            "out",
            "-w",
            str(warehouse),
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    _check_the_hostile_label_is_an_escape_everywhere(tmp_path / "out" / "epoch-3")


@pytest.mark.parametrize("fmt", ["table", "markdown", "vertical"])
def test_query_shows_control_characters_of_the_data_as_escapes(tmp_path, fmt):
    """`query` printed a build label's ANSI sequence raw in its table, Markdown and vertical output: the
    terminal ran it. The people's formats show it as an escape; CSV, JSON and Parquet keep the value."""
    from pipeline.output.query.execute import render_query
    from pipeline.output.query.formats import QueryFormat
    from pipeline.warehouse.database import open_for_write, open_sandboxed

    path = tmp_path / "w.duckdb"
    open_for_write(path).close()
    con = open_sandboxed(path)
    try:
        sql = "SELECT chr(27) || '[31mred' || chr(27) || '[0m' || chr(65535) AS \"b\x1b[1muild\", 7 AS n"
        options = {"vertical": True} if fmt == "vertical" else {}
        query_format = QueryFormat.table if fmt == "vertical" else QueryFormat(fmt)
        shown = render_query(con, sql, {}, query_format, **options).data
        assert isinstance(shown, str)
        assert not HIDDEN.search(shown), shown
        assert "\\x1b[31mred\\x1b[0m\\uffff" in shown and "b\\x1b[1muild" in shown
        csv_text = render_query(con, sql, {}, QueryFormat.csv).data
        assert "\x1b[31mred\x1b[0m\uffff" in csv_text  # data formats keep the value as it is
    finally:
        con.close()
