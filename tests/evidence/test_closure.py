"""Closed or not, always said: every evidence table over an epoch or window says whether its epochs are closed
(the closed-epoch rule of `run`, the named query closed_epochs); a comparison with an open epoch or a
statistical test over one is refused unless --allow-open, and then every statistic is marked provisional.

On the samples, epoch 4 is open (0 of 3 escrows settled), epoch 3 closed (all 3 settled), epoch 2 closed by
the finality lag (2 of 3 settled)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.evidence import EvidenceError, compute
from pipeline.output.render import render
from pipeline.warehouse.database import open_read_only
from tests.factories import data_samples_warehouse
from tests.helpers import Done, cli_in

FOCAL = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"  # data-samples/builds.toml focal_host
OPEN_4 = "epoch 4 open (0 of 3 escrows settled; closes when all escrows settle, or 6h after the last settlement)"


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Path:
    return data_samples_warehouse(tmp_path_factory.mktemp("closure") / "w.duckdb", vllm_log_host=FOCAL)


@pytest.fixture(scope="module")
def con(warehouse):
    con = open_read_only(warehouse)
    yield con
    con.close()


def _cli(warehouse: Path, *args: str) -> Done:
    """In-process: what a command says and exits with, no property of a process of its own."""
    return cli_in(warehouse.parent, *args, "--warehouse", str(warehouse))


ALLOWED_OPEN = ("evidence", "tracker", "--host", FOCAL, "--epoch", "3", "--compare", "4", "--allow-open")


@pytest.fixture(scope="module")
def allowed_open(warehouse) -> Done:
    """`evidence tracker --epoch 3 --compare 4 --allow-open` in Markdown, run once for the tests that read it."""
    return _cli(warehouse, *ALLOWED_OPEN)


@pytest.fixture(scope="module")
def reports(con) -> dict:
    """The epoch reports of open epoch 4 and closed epoch 3, built once for the tests that read them."""
    from pipeline.output.report import build_epoch_report

    return {epoch: build_epoch_report(con, epoch, FOCAL) for epoch in (4, 3)}


def test_a_comparison_with_an_open_epoch_is_refused_in_one_line(warehouse):
    """Before: `tracker --epoch 3 --compare 4` printed 31 of 69 against 0 of 44 with "Fisher exact p =
    9.11e-09", exit 0, though epoch 4's invalid count is 0 only because nothing settled yet."""
    done = _cli(warehouse, "evidence", "tracker", "--host", FOCAL, "--epoch", "3", "--compare", "4")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"error: {OPEN_4}: a comparison over an open epoch is not evidence yet; "
        "give --allow-open to compute it marked provisional"
    ]


def test_allowed_open_every_format_marks_the_statistics_provisional(warehouse, allowed_open):
    args = ALLOWED_OPEN
    markdown = allowed_open
    assert markdown.returncode == 0, markdown.stderr
    assert f"- provisional: {OPEN_4}; every count and statistic here may still change" in markdown.stdout
    assert f"Provisional: {OPEN_4}; every count and statistic here may still change." in markdown.stdout
    assert "--allow-open" in markdown.stdout.split("- command: ")[1]  # the footer's command reproduces it
    document = json.loads(_cli(warehouse, *args, "--format", "json").stdout)
    closure = document["params"]["closure"]
    assert (closure["closed"], closure["provisional"], closure["open_epochs"]) == (False, True, [4])
    assert [(e["epoch"], e["closed"], e["escrows_settled"], e["escrows"]) for e in closure["epochs"]] == [
        (3, True, 3, 3),
        (4, False, 0, 3),
    ]
    assert document["stats"]["provisional"].startswith(OPEN_4)
    assert document["stats"]["compare"]  # the tests are there, beside the mark
    assert all(row["provisional"] is True for row in document["rows"])
    csv = _cli(warehouse, *args, "--format", "csv").stdout.splitlines()
    assert csv[0].split(",")[-1] == "provisional" and all(line.endswith(",true") for line in csv[1:])


def test_epoch_summary_of_the_open_epoch_says_open(con):
    """Before: validated 0, invalidated 0 and no open/closed field in its JSON."""
    result = compute("epoch-summary", con, host=FOCAL, epoch=4, command="c")
    assert f"Provisional: {OPEN_4}; every count and statistic here may still change." in result.notes
    assert result.params["closure"]["closed"] is False and result.params["closure"]["open_epochs"] == [4]
    assert json.loads(render(result, "json"))["params"]["closure"]["epochs"][0]["closes"] == (
        "when all escrows settle, or 6h after the last settlement"
    )
    assert render(result, "csv").splitlines()[1].endswith(",true")  # the provisional column


def test_all_data_rows_of_one_epoch_each_say_whether_theirs_is_open(con):
    """Over all data the open epoch's row of epoch-summary and tracker read in CSV as final as the others: only the
    note and the JSON's params said epoch 4 was open. A table of rows without an epoch keeps its note only."""
    for name in ("epoch-summary", "tracker"):
        result = compute(name, con, host=FOCAL, command="c")
        assert result.stats["provisional"].startswith(OPEN_4)
        assert dict(result.rows.select("epoch", "provisional").iter_rows()) == {2: False, 3: False, 4: True}, name
        csv = render(result, "csv").splitlines()
        assert csv[0].endswith(",provisional") and [line.rsplit(",", 1)[1] for line in csv[1:]] == [
            "false",
            "false",
            "true",
        ]
    votes = compute("votes-by-build", con, host=FOCAL, command="c")
    assert votes.stats["provisional"].startswith(OPEN_4) and "provisional" not in votes.rows.columns


def test_a_closed_epoch_says_closed_and_when(con):
    result = compute("epoch-summary", con, host=FOCAL, epoch=3, command="c")
    assert "Closed: epoch 3 closed at 2026-10-25T23:30:16Z (all escrows settled; 3 of 3 escrows settled)." in (
        result.notes
    )
    assert result.params["closure"]["closed"] is True and "provisional" not in result.stats
    assert "provisional" not in result.rows.columns
    lagged = compute("epoch-summary", con, host=FOCAL, epoch=2, command="c")
    assert any(
        n.startswith("Closed: epoch 2 closed at ") and "(finality lag; 2 of 3 escrows settled)" in n
        for n in lagged.notes
    )


def test_the_finality_lag_decides_whether_an_epoch_with_an_unsettled_escrow_is_closed(con):
    """The rule `run` writes the reports of closed epochs by (pipeline/jobs/run.py): epoch 2, 2 of 3 escrows
    settled, is closed 6 h after its last settlement; under a lag of 30 days (longer than from that settlement
    to the data's clock) it stays open; a settled epoch is closed whatever the lag."""
    from datetime import timedelta

    from pipeline.output.report import epoch_closure

    def closed(lag: timedelta) -> list[tuple[int, str | None]]:
        return epoch_closure(con, lag).select("epoch_id", "closed_by").rows()

    assert closed(timedelta(hours=6)) == [(2, "finality lag"), (3, "all escrows settled"), (4, None)]
    assert closed(timedelta(days=30)) == [(2, None), (3, "all escrows settled"), (4, None)]
    lag = epoch_closure(con, timedelta(hours=6)).filter(epoch_id=2)
    assert lag["closed_at"][0] - lag["last_settled_at"][0] == timedelta(hours=6)


def test_a_statistical_test_over_the_open_epoch_is_refused_unless_allowed(con):
    with pytest.raises(EvidenceError, match=r"^epoch 4 open .*: a statistical test over an open epoch is not evidence"):
        compute("peer-invalidation", con, host=FOCAL, epoch=4, command="c")
    allowed = compute("peer-invalidation", con, host=FOCAL, epoch=4, command="c", allow_open=True)
    assert allowed.stats["provisional"].startswith(OPEN_4)
    # a time window reaching into epoch 4 is over it too
    with pytest.raises(EvidenceError, match=r"^epoch 4 open"):
        compute("peer-invalidation", con, host=FOCAL, since="2026-10-25T00:00:00Z", until="2026-11-01", command="c")


def test_the_report_of_the_open_epoch_marks_every_section(reports):
    report = reports[4]
    computed = [s for s in report.sections if s.result is not None]
    assert computed and all(any(n.startswith(f"Provisional: {OPEN_4}") for n in s.notes) for s in computed)
    assert all("--allow-open" in (s.command or "") for s in computed)
    closed = reports[3]
    sections = [s for s in closed.sections if s.result is not None]
    assert all(any(n.startswith("Closed: ") and "epoch 3 closed at" in n for n in s.notes) for s in sections)
    assert all("--allow-open" not in (s.command or "") for s in sections)


def test_the_main_findings_of_the_open_epoch_are_marked_provisional(reports):
    """The epoch-4 report's findings gave "Fisher exact (two-sided) p = 0.6122" and rates with no mark:
    a reader quoting the first lines of the report took a test over an open epoch for evidence."""
    findings = reports[4].findings
    assert findings and any("p = " in f.text for f in findings)
    for finding in findings:
        assert finding.text.endswith("(provisional: epoch 4 is open)"), finding.text
    closed = reports[3].findings
    assert closed and not any("provisional" in f.text for f in closed)


def test_a_bundles_manifest_says_whether_its_epoch_is_closed(con):
    """MANIFEST.json named the window only: a bundle of open epoch 4 read as final to whoever reads its
    manifest (what `verify` and a reviewer's tools read first)."""
    import json

    from pipeline.output.bundle import _manifest, bundle_request

    def manifest_closure(epoch: int) -> dict:
        request = bundle_request(FOCAL, epoch, None, None, None, None)
        return json.loads(_manifest(con, request, {}, {}, []))["closure"]

    open_4 = manifest_closure(4)
    assert open_4["closed"] is False and open_4["provisional"] is True and open_4["open_epochs"] == [4]
    assert open_4["epochs"][0]["escrows_settled"] == 0 and open_4["epochs"][0]["escrows"] == 3
    closed_3 = manifest_closure(3)
    assert closed_3["closed"] is True and closed_3["open_epochs"] == [] and closed_3["epochs"][0]["closed_at"]


def test_the_tracker_disagreement_note_names_the_participant_whole(allowed_open):
    """The note under the tracker table named the participant as "gonka1qapr9h4k…": an address cut in the
    table's own output, which no reader can look up."""
    done = allowed_open
    assert done.returncode == 0, done.stderr
    (note,) = [line for line in done.stdout.splitlines() if "tracker/session-storage disagreement" in line]
    assert f"escrow 4100 {FOCAL} protocol_misses vs timed_out" in note and "…" not in note
