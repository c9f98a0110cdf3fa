"""Verdict rules by version (docs/sources.md, verdict rules by version): gonka-ai/gonka #1487 (merged 2026-07-20) made
a 400/422 of the validator's own re-run, and an executor answer without logprobs, invalid verdicts where they passed
before. A score or verdict follows the rule of the validator's build (deployed before or after the change), or its
own date where the build is unknown; the similarity and votes-by-build tables say which applied and how it is known.
"""

from __future__ import annotations

import polars as pl

from pipeline.core.address import sample_address
from pipeline.evidence import compute
from pipeline.ingest.builds import load_builds
from pipeline.ingest.logs import ingest_logs
from pipeline.warehouse.database import open_for_write
from tests.factories import load_builds_of, sample_warehouse

VALIDATOR = sample_address("vald8t0r")


def _builds(path, host: str, *entries: tuple[str, str]):
    body = "".join(f'[[builds]]\nhost = "{host}"\nlabel = "{label}"\nsince = "{since}"\n\n' for label, since in entries)
    path.write_text(body)
    return path


def _rules(con) -> list[tuple]:
    rows = compute("similarity", con, host=VALIDATOR, command="test", threshold=0.9).rows
    return rows.filter(pl.col("source") == "scores").select("validator_build", "validation_rule", "rule_by", "n").rows()


def test_scores_follow_the_validators_build_else_their_date(tmp_path):
    # one score the day before the merge of #1487, one the day after (dapi slog text lines)
    lines = [
        f'time=2026-07-{day}T12:00:00.000Z level=INFO msg="Cosine similarity validation result" '
        f"subsystem=Validation cosineSimValue={v} inferenceId={i} executor=gonka1peer "
        "model=deepseek-ai/DeepSeek-V4-Flash"
        for i, (day, v) in enumerate((("19", 0.95), ("21", 0.97)))
    ]
    (tmp_path / "dapi.log").write_text("\n".join(lines) + "\n")
    con = open_for_write(tmp_path / "w.duckdb")
    try:
        ingest_logs(con, [tmp_path / "dapi.log"], host=VALIDATOR, kind="validator")
        # no build known: by each score's date
        assert _rules(con) == [("unattributed", "#1487", "date", 1), ("unattributed", "before #1487", "date", 1)]
        # a build deployed before the change runs the old rule, also after the merge date
        load_builds(con, _builds(tmp_path / "b1.toml", VALIDATOR, ("old", "2026-07-10T00:00:00Z")))
        assert _rules(con) == [("old", "before #1487", "build", 2)]
        # a build deployed after it runs the new one
        load_builds(
            con,
            _builds(tmp_path / "b2.toml", VALIDATOR, ("old", "2026-07-10T00:00:00Z"), ("new", "2026-07-21T00:00:00Z")),
        )
        assert _rules(con) == [("new", "#1487", "build", 1), ("old", "before #1487", "build", 1)]
        notes = compute("similarity", con, host=VALIDATOR, command="test").notes
        assert any("Verdict rule(s) applied: #1487, before #1487" in n for n in notes)
        assert any("threshold 0.900 and sampling rate 10%" in n for n in notes)
    finally:
        con.close()


def test_votes_follow_the_validators_build(request, timeline, tmp_path):
    """The sample's verdicts (October 2026) under a build of the focal host deployed before #1487 ran the old rule,
    those under the build deployed after it the new one; the counts split between them add up."""
    built = sample_warehouse(request, timeline.copy(last_epoch=4), label="rules")
    focal = timeline.focal_host
    con = open_for_write(built.path)
    try:
        plain = compute("votes-by-build", con, host=focal, command="test").rows
        assert set(plain.filter(pl.col("total") > 0)["rule_by"]) == {"date"}
        assert set(plain.filter(pl.col("total") > 0)["validation_rule"]) == {"#1487"}
    finally:
        con.close()
    load_builds_of(
        built.path,
        _builds(tmp_path / "b.toml", focal, ("pre-fix", "2026-07-01T00:00:00Z"), ("fixed", "2026-10-20T12:00:00Z")),
    )
    con = open_for_write(built.path)
    try:
        rows = compute("votes-by-build", con, host=focal, command="test").rows.filter(pl.col("total") > 0)
    finally:
        con.close()
    got = {(r["build"], r["validation_rule"], r["rule_by"]) for r in rows.iter_rows(named=True)}
    assert got == {("pre-fix", "before #1487", "build"), ("fixed", "#1487", "build")}
    assert rows["total"].sum() == plain["total"].sum()
