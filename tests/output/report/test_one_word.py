"""One word, one number: every labelled figure of a samples report that appears twice agrees, over
every section; and the same counts under the same names in `query`, `doctor` and `preflight`."""

from __future__ import annotations

import re
from collections import defaultdict

import pytest
from typer.testing import CliRunner

from pipeline.cli.app import app
from pipeline.core.paths import DATA_SAMPLES_DIR

runner = CliRunner()
HOST = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"  # focal host of data-samples/
LABEL_COLUMNS = ("final_status", "status", "measure")  # a table whose rows are named by one of these columns
NUMBER = re.compile(r"^-?[\d,]+(\.\d+)?%?$")


@pytest.fixture(scope="module")
def report_md(report_dir) -> str:
    return (report_dir / "report.md").read_text()


def _sections(md: str) -> dict[str, str]:
    """The report's blocks: the header and findings (before the first numbered section), then each section."""
    parts = re.split(r"\n## (?=\d+\. )", md)
    out = {"head": parts[0]}
    for part in parts[1:]:
        heading, _, body = part.partition("\n")
        out[heading] = body
    return out


def _tables(body: str) -> list[tuple[list[str], list[list[str]]]]:
    tables, lines = [], body.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("| ") and i + 1 < len(lines) and lines[i + 1].startswith("| ---"):
            header = [c.strip() for c in lines[i].strip("|").split(" | ")]
            rows, i = [], i + 2
            while i < len(lines) and lines[i].startswith("| "):
                rows.append([c.strip() for c in lines[i].strip("|").split(" | ")])
                i += 1
            tables.append((header, rows))
        i += 1
    return tables


def _count(cell: str) -> str:
    """The figure of a cell, its interval left out: ``36.06% (34.25–37.96%)`` → ``36.06%``."""
    return cell.split(" (")[0]


def labelled_figures(md: str) -> dict[str, set[tuple[str, str]]]:
    """label → {(figure, where)} for every figure the report gives under a name: the host's counts of the
    tables whose rows are named (overview, epoch summary: 'N of M'), per-build cells of tables with one row per
    build, '- name: N' statistics lines, the findings' and the header's counts, preflight's block size."""
    found: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for where, body in _sections(md).items():
        for header, rows in _tables(body):
            label_col = next((c for c in LABEL_COLUMNS if c in header), None)
            if label_col is not None:
                count_col, of_col = ("executed_by_host", "of_host") if "executed_by_host" in header else ("count", "of")
                for row in rows:
                    cells = dict(zip(header, row, strict=True))
                    found[cells[label_col]].add((f"{cells[count_col]} of {cells[of_col]}", where))
                    if cells.get("of_what") == "inferences executed" or of_col == "of_host":
                        found["inferences executed by the host"].add((cells[of_col], where))
            builds = [dict(zip(header, row, strict=True)).get("build") for row in rows]
            if "build" in header and len(set(builds)) == len(builds):  # one row per build
                for row in rows:
                    cells = dict(zip(header, row, strict=True))
                    for column, cell in cells.items():
                        if column != "build" and NUMBER.match(_count(cell)):
                            found[f"{cells['build']}: {column}"].add((_count(cell), where))
                    if "block_size" in cells:
                        found[f"{cells['build']}: DSpark block size"].add((cells["block_size"], where))
            if header[:2] == ["build", "check"]:  # preflight: the block size its speculative check names
                for row in rows:
                    cells = dict(zip(header, row, strict=True))
                    m = re.search(r"DSpark block size ([\w, ]+?)(?:;|$| \()", cells["evidence"])
                    if cells["name"] == "speculative" and m:
                        value = "–" if m.group(1) == "unknown" else m.group(1)
                        found[f"{cells['build']}: DSpark block size"].add((value, where))
        for m in re.finditer(r"^- ([a-z_]+): ([\d,]+)$", body, re.M):  # statistics lines: "- windows: 141"
            found[m.group(1)].add((m.group(2), where))
    head = _sections(md)["head"]
    m = re.search(r"executed by the host: ([\d,]+) of", head)
    assert m, "the header names the host's executed inferences"
    found["inferences executed by the host"].add((m.group(1), "head"))
    for m in re.finditer(r"([\d,]+) of ([\d,]+) executed inferences \([^)]*\) ended (\w+)", head):
        found[m.group(3)].add((f"{m.group(1)} of {m.group(2)}", "findings"))
    for m in re.finditer(r"([\d,]+) of ([\d,]+) executed inferences \([^)]*\) timed out", head):
        found["timed_out"].add((f"{m.group(1)} of {m.group(2)}", "findings"))
    for m in re.finditer(r"([\d,]+) of ([\d,]+) challenged cleared", head):
        found["cleared"].add((f"{m.group(1)} of {m.group(2)}", "findings"))
        found["challenged"].add((m.group(2), "findings (cleared of)"))
    return found


def test_every_labelled_figure_that_appears_twice_agrees(report_md):
    found = labelled_figures(report_md)
    # the challenged count the findings name as cleared's whole is the epoch summary's challenged
    challenged = {fig.split(" of ")[0] for fig, _ in found.pop("challenged", set())}
    assert len(challenged) == 1, f"challenged: {challenged}"
    twice = {label: figs for label, figs in found.items() if len({w for _, w in figs}) > 1}
    # the extraction finds what it is meant to: the names the issue saw disagree, and others that appear twice
    assert {"finished", "timed_out", "invalidated", "inferences executed by the host", "windows"} <= set(found)
    assert len(twice) >= 8, sorted(twice)
    # a figure is 'N' or 'N of M': the counts agree, and so do the wholes where two give one
    disagree = {
        label: sorted(figs)
        for label, figs in twice.items()
        if len({f.split(" of ")[0] for f, _ in figs}) > 1
        or len({f.split(" of ")[1] for f, _ in figs if " of " in f}) > 1
    }
    assert disagree == {}, disagree


def test_the_overview_and_the_epoch_summary_name_different_counts_differently(report_md):
    overview = _sections(report_md)["1. Epoch overview"]
    (header, rows), *_ = _tables(overview)
    labels = [r[header.index("final_status")] for r in rows]
    assert "finished" not in labels and "challenged" not in labels
    assert {"finished_no_verdict", "challenged_unresolved", "drained"} <= set(labels) | {"drained"}
    assert "The epoch summary's finished (every inference with a finish transaction" in overview


def test_query_epoch_summary_splits_drained_records_as_the_report_does(sample_dir, report_md):
    """query epoch_summary's final statuses (drained apart) are the overview's `inferences` column."""
    (header, rows), *_ = _tables(_sections(report_md)["1. Epoch overview"])
    overview = {r[header.index("final_status")]: int(r[header.index("inferences")].replace(",", "")) for r in rows}
    result = runner.invoke(
        app, ["query", "epoch_summary", "--format", "json", "-w", str(sample_dir / "warehouse.duckdb")]
    )
    assert result.exit_code == 0, result.output
    import json

    (q,) = [r for r in json.loads(result.output) if r["epoch"] == 3]
    # the same counts under the same names: never `finished`/`challenged`, which evidence epoch-summary and
    # the report's epoch summary give to other counts (a finish transaction; ever challenged)
    assert "finished" not in q and "challenged" not in q
    for column in ("finished_no_verdict", "challenged_unresolved", "validated", "invalidated", "timed_out", "drained"):
        assert q[column] == overview.get(column, 0), column


def test_doctor_says_the_quarantined_rows_run_and_the_report_say(sample_dir, report_md):
    (header, rows), *_ = _tables(_sections(report_md)["17. Quarantine"])
    in_report = sum(int(r[header.index("quarantined")].replace(",", "")) for r in rows)
    assert in_report == 3  # the samples' three transactions of an unknown kind
    result = runner.invoke(
        app, ["doctor", str(DATA_SAMPLES_DIR / "store"), "--warehouse", str(sample_dir / "warehouse.duckdb")]
    )
    assert result.exit_code == 0, result.output
    said = re.findall(r"quarantined rows: ([\d,]+)", result.output)
    assert said == [str(in_report)], result.output
