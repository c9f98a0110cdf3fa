"""Verdict rules by version (docs/sources.md, verdict rules by version): gonka-ai/gonka #1487 (merged 2026-07-20) made
a 400/422 of the validator's own re-run, and an executor answer without logprobs, invalid verdicts where they passed
before. A score or verdict follows the rule of the validator's build (deployed before or after the change), or its
own date where the build is unknown; the similarity and votes-by-build tables say which applied and how it is known.
"""

from __future__ import annotations

import polars as pl

from pipeline.core.address import sample_address
from pipeline.evidence import compute
from pipeline.ingest.builds import BuildsError, load_builds
from pipeline.ingest.logs import ingest_logs
from pipeline.warehouse.database import open_for_write
from tests.factories import load_builds_of

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


def test_votes_follow_the_validators_build(bare_copy4, timeline, tmp_path):
    """The sample's verdicts (October 2026) under a build of the focal host deployed before #1487 ran the old rule,
    those under the build deployed after it the new one; the counts split between them add up."""
    focal = timeline.focal_host
    con = open_for_write(bare_copy4)
    try:
        plain = compute("votes-by-build", con, host=focal, command="test").rows
        assert set(plain.filter(pl.col("total") > 0)["rule_by"]) == {"date"}
        assert set(plain.filter(pl.col("total") > 0)["validation_rule"]) == {"#1487"}
    finally:
        con.close()
    load_builds_of(
        bare_copy4,
        _builds(tmp_path / "b.toml", focal, ("pre-fix", "2026-07-01T00:00:00Z"), ("fixed", "2026-10-20T12:00:00Z")),
    )
    con = open_for_write(bare_copy4)
    try:
        rows = compute("votes-by-build", con, host=focal, command="test").rows.filter(pl.col("total") > 0)
    finally:
        con.close()
    got = {(r["build"], r["validation_rule"], r["rule_by"]) for r in rows.iter_rows(named=True)}
    assert got == {("pre-fix", "before #1487", "build"), ("fixed", "#1487", "build")}
    assert rows["total"].sum() == plain["total"].sum()


def _versions(path, host: str, label: str, since: str, **rules: str):
    """A builds file with one build of `host` and [[devshard_versions]] entries version = rule set."""
    body = f'[[builds]]\nhost = "{host}"\nlabel = "{label}"\nsince = "{since}"\n\n'
    body += "".join(f'[[devshard_versions]]\nversion = "{v}"\nrules = "{r}"\n\n' for v, r in rules.items())
    path.write_text(body)
    return path


def test_rule_set_follows_the_escrows_devshard_version_on_the_same_date(bare_copy4, timeline, tmp_path):
    """Two escrows of different devshard versions judged at the same time: the one whose version the builds file
    names as short-output #1955 gets that rule set (rule_by version); the other keeps the dated rule (assumed)."""
    focal = timeline.focal_host
    load_builds_of(
        bare_copy4,
        _versions(tmp_path / "b.toml", focal, "fixed", "2026-10-01T00:00:00Z", **{"v0.2.5": "short-output #1955"}),
    )
    con = open_for_write(bare_copy4)
    try:
        new, old = (
            con.execute(f"SELECT min(escrow_id) FROM escrows WHERE version = '{v}'").fetchone()[0]
            for v in ("v0.2.5", "v0.2.4")
        )
        same = "TIMESTAMPTZ '2026-10-24 12:00:00+00'"
        got = con.execute(
            f"SELECT verdict_rule_of('{new}', '{focal}', {same}), verdict_rule_by_of('{new}', '{focal}', {same}), "
            f"verdict_rule_of('{old}', '{focal}', {same}), verdict_rule_by_of('{old}', '{focal}', {same})"
        ).fetchone()
        assert got == ("short-output #1955", "version", "#1487", "build")
        rows = compute("votes-by-build", con, host=focal, command="test").rows.filter(pl.col("total") > 0)
        sources = con.execute("SELECT rule, source FROM verdict_rules ORDER BY rule").fetchall()
    finally:
        con.close()
    # the v0.2.5 escrows' verdicts (23-25 October) under #1955 by version, the others under #1487 by build
    assert set(rows["validation_rule"]) == {"#1487 + short-output #1955"}
    assert set(rows["rule_by"]) == {"build + version"}
    assert dict(sources)["short-output #1955"].startswith("gonka-ai/gonka devshard/docs/proposals/")


def test_votes_split_by_version(bare_copy4, timeline, tmp_path):
    """Mapping one version to the #1487 rule explicitly moves its verdicts from 'date' to 'version'; totals hold."""
    focal = timeline.focal_host
    con = open_for_write(bare_copy4)
    try:
        before = compute("votes-by-build", con, host=focal, command="test").rows
    finally:
        con.close()
    other = VALIDATOR  # the build of a host of no escrow: the focal host's verdicts stay by date
    builds = _versions(tmp_path / "b.toml", other, "x", "2026-01-01T00:00:00Z", **{"v0.2.6": "#1487"})
    load_builds_of(bare_copy4, builds)
    con = open_for_write(bare_copy4)
    try:
        after = compute("votes-by-build", con, host=focal, command="test").rows.filter(pl.col("total") > 0)
    finally:
        con.close()
    assert set(after["rule_by"]) == {"date + version"}
    assert after["total"].sum() == before["total"].sum()


def test_unknown_rule_set_is_a_one_line_error(tmp_path):
    con = open_for_write(tmp_path / "w.duckdb")
    try:
        path = _versions(tmp_path / "b.toml", VALIDATOR, "x", "2026-01-01T00:00:00Z", **{"v9": "newest"})
        try:
            load_builds(con, path)
        except BuildsError as e:
            assert str(e) == (
                f"{path}: devshard_versions names rule set 'newest', not one of #1487, before #1487, short-output #1955"
            )
        else:
            raise AssertionError("an unknown rule set was accepted")
    finally:
        con.close()
