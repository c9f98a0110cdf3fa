"""Renderers of one hand-built EvidenceResult, asserted to the character."""

from __future__ import annotations

import datetime as dt
import math
from zoneinfo import ZoneInfo

import orjson
import polars as pl
import pytest

from pipeline.evidence.result import EvidenceResult, Provenance
from pipeline.evidence.stats import CMHResult, FisherResult
from pipeline.output.render import FORMATS, render, render_table

UTC = dt.UTC


def provenance(quarantined_rows: int = 0) -> Provenance:
    return Provenance(
        sources=[
            {
                "source_id": "5f0c1a2e-lineage",
                "source_kind": "postgres",
                "label": "host-a devshard",
                "copy_at": dt.datetime(2026, 10, 26, 19, 35, tzinfo=UTC),
                "input_digest": "sha256:" + "0123456789abcdef" * 4,
            },
            {
                "source_id": "/data/copies/store-b",
                "source_kind": "sqlite",
                "label": None,
                # a zone-aware copy time outside UTC must come out in UTC
                "copy_at": dt.datetime(2026, 10, 26, 21, 0, 30, tzinfo=ZoneInfo("Europe/Berlin")),
            },
        ],
        run_ids=["run-0007", "run-0008"],
        window={"since": dt.datetime(2026, 10, 25, 23, 6, tzinfo=UTC), "until": dt.datetime(2026, 10, 26, 12, 48)},
        quarantined_rows=quarantined_rows,
        command=(
            "gonka-evidence evidence votes-by-build --host gonka1abc "
            "--since 2026-10-25T23:06:00Z --until 2026-10-26T12:48:00Z"
        ),
        pipeline_version="0.1.0",
    )


def votes_result(quarantined_rows: int = 3) -> EvidenceResult:
    rows = pl.DataFrame(
        {
            "build": ["V1, no DSpark", "V2 + DSpark | vLLM fix"],
            "valid": [330, 206],
            "invalid": [60, 17],
            "judged": [1234567, 0],
            "invalid_rate": [0.0071, None],
            "ci_low": [0.0043, None],
            "ci_high": [0.0117, None],
            "mean_accepted": [2.861234, float("nan")],
            "validators": [["gonka1x", "gonka1y"], None],
            "first_vote_at": [dt.datetime(2026, 10, 25, 23, 6, 0), dt.datetime(2026, 10, 26, 1, 2, 3, 500000)],
        },
        schema_overrides={"first_vote_at": pl.Datetime("us", "UTC")},
    )
    return EvidenceResult(
        evidence="votes-by-build",
        title="Validator votes on other hosts' answers",
        params={"host": "gonka1abc", "since": dt.datetime(2026, 10, 25, 23, 6, tzinfo=UTC), "min_votes": 1},
        rows=rows,
        stats={
            "fisher": FisherResult(odds_ratio=0.1739, p_value=3.2e-7, alternative="two-sided"),
            "cmh": CMHResult(
                statistic=12.5,
                p_value=0.000403,
                pooled_odds_ratio=2.174,
                or_ci_low=1.984,
                or_ci_high=2.383,
                strata_used=11,
                strata_dropped=2,
            ),
            "share_p_value": 0.0421,
            "escrows": 11,
        },
        provenance=provenance(quarantined_rows),
        notes=["The windows judge different answers; sample sizes vary."],
    )


EXPECTED_MARKDOWN = """\
### Validator votes on other hosts' answers

| build | valid | invalid | judged | invalid_rate | mean_accepted | validators | first_vote_at |
| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |
| V1, no DSpark | 330 | 60 | 1,234,567 | 0.71% (0.43–1.17%) | 2.861 | gonka1x, gonka1y | 2026-10-25T23:06:00Z |
| V2 + DSpark \\| vLLM fix | 206 | 17 | 0 | – | – | – | 2026-10-26T01:02:03.500000Z |

- fisher: Fisher exact, two-sided: p = 3.20e-07, OR 0.1739
- cmh: Cochran–Mantel–Haenszel, two-sided, correction: continuity 0.5: χ² = 12.50 (1 df), p = 4.03e-04, \
pooled OR 2.174 (95% CI 1.984–2.383, Robins–Breslow–Greenland), strata: 11 used, 2 dropped
- share_p_value: 0.0421
- escrows: 11

The windows judge different answers; sample sizes vary.

---

- source: host-a devshard (postgres), copy 2026-10-26T19:35:00Z, input sha256:0123456789abcdef
- source: store-b (sqlite), copy 2026-10-26T20:00:30Z
- window: [2026-10-25T23:06:00Z, 2026-10-26T12:48:00Z)
- runs: run-0007, run-0008
- quarantined rows: 3
- pipeline: gonka-evidence 0.1.0
- command: `gonka-evidence evidence votes-by-build --host gonka1abc \
--since 2026-10-25T23:06:00Z --until 2026-10-26T12:48:00Z`"""


def test_markdown_exact():
    assert render(votes_result(), "markdown") == EXPECTED_MARKDOWN


def test_markdown_omits_quarantine_line_when_zero():
    text = render(votes_result(quarantined_rows=0), "markdown")
    assert "quarantined" not in text
    assert text.endswith("- pipeline: gonka-evidence 0.1.0\n- command: `" + provenance().command + "`")


def test_markdown_empty_rows_and_epoch_window():
    result = EvidenceResult(
        evidence="votes-by-build",
        title="Validator votes on other hosts' answers",
        params={"epoch": 436},
        rows=pl.DataFrame(schema={"build": pl.String, "valid": pl.Int64}),
        provenance=Provenance(
            sources=[],
            run_ids=[],
            window={"epoch": 436},
            quarantined_rows=0,
            command="gonka-evidence evidence votes-by-build --epoch 436",
            pipeline_version="0.1.0",
        ),
        notes=["host is in no escrow of epoch 436"],
    )
    assert render(result, "markdown") == (
        "### Validator votes on other hosts' answers\n\n"
        "_no rows_\n\n"
        "host is in no escrow of epoch 436\n\n"
        "---\n\n"
        "- window: epoch 436\n"
        "- runs: –\n"
        "- pipeline: gonka-evidence 0.1.0\n"
        "- command: `gonka-evidence evidence votes-by-build --epoch 436`"
    )


def test_markdown_without_provenance_or_stats():
    result = EvidenceResult("x", "T", {}, pl.DataFrame({"n": [1]}))
    assert render(result, "markdown") == "### T\n\n| n |\n| ---: |\n| 1 |"


def test_markdown_rate_pairing_by_prefix_and_small_numbers():
    rows = pl.DataFrame(
        {
            "invalid_rate": [0.0095],
            "invalid_rate_ci_low": [0.0082],
            "invalid_rate_ci_high": [0.011],
            "timeout_share": [0.5],  # no interval of its own: plain percentage
            "ci_low": [0.1],  # two unpaired-looking rates would be ambiguous; one is paired above
            "ci_high": [0.9],
            "tiny": [0.000123456],
            "big": [12345.678],
        }
    )
    text = render(EvidenceResult("x", "T", {}, rows), "markdown")
    assert text.splitlines()[2:5] == [
        "| invalid_rate | timeout_share | tiny | big |",
        "| ---: | ---: | ---: | ---: |",
        "| 0.95% (0.82–1.10%) | 50.00% (10.00–90.00%) | 1.235e-04 | 12,346 |",
    ]


def test_markdown_command_with_backticks():
    result = votes_result()
    result.provenance.command = "gonka-evidence query `x`"
    assert render(result, "markdown").endswith("- command: `` gonka-evidence query `x` ``")


def test_markdown_p_value_underflow():
    result = EvidenceResult("x", "T", {}, pl.DataFrame(), stats={"cmh": {"p_value": 0.0}})
    assert render(result, "markdown") == "### T\n\n_no rows_\n\n- cmh: p < 1e-300"


def test_csv_exact():
    assert render(votes_result(), "csv") == (
        "build,valid,invalid,judged,invalid_rate,ci_low,ci_high,mean_accepted,validators,first_vote_at\n"
        '"V1, no DSpark",330,60,1234567,0.0071,0.0043,0.0117,2.861234,gonka1x;gonka1y,2026-10-25T23:06:00Z\n'
        "V2 + DSpark | vLLM fix,206,17,0,,,,NaN,,2026-10-26T01:02:03.500Z"
    )


def test_csv_empty_rows_is_header_only():
    rows = pl.DataFrame(schema={"build": pl.String, "valid": pl.Int64, "tags": pl.List(pl.String)})
    assert render(EvidenceResult("x", "T", {}, rows), "csv") == "build,valid,tags"


def test_json_object():
    document = orjson.loads(render(votes_result(), "json"))
    assert list(document) == ["evidence", "params", "rows", "stats", "provenance"]
    assert document["evidence"] == "votes-by-build"
    assert document["params"] == {"host": "gonka1abc", "since": "2026-10-25T23:06:00Z", "min_votes": 1}
    assert document["rows"] == [
        {
            "build": "V1, no DSpark",
            "valid": 330,
            "invalid": 60,
            "judged": 1234567,
            "invalid_rate": 0.0071,
            "ci_low": 0.0043,
            "ci_high": 0.0117,
            "mean_accepted": 2.861234,
            "validators": ["gonka1x", "gonka1y"],
            "first_vote_at": "2026-10-25T23:06:00Z",
        },
        {
            "build": "V2 + DSpark | vLLM fix",
            "valid": 206,
            "invalid": 17,
            "judged": 0,
            "invalid_rate": None,
            "ci_low": None,
            "ci_high": None,
            "mean_accepted": None,  # NaN
            "validators": None,
            "first_vote_at": "2026-10-26T01:02:03.500000Z",
        },
    ]
    assert document["stats"] == {
        "fisher": {"test": "Fisher exact", "odds_ratio": 0.1739, "p_value": 3.2e-7, "alternative": "two-sided"},
        "cmh": {
            "test": "Cochran–Mantel–Haenszel",
            "alternative": "two-sided",
            "correction": "continuity 0.5",
            "df": 1,
            "or_ci_method": "Robins–Breslow–Greenland",
            "statistic": 12.5,
            "p_value": 0.000403,
            "pooled_odds_ratio": 2.174,
            "or_ci_low": 1.984,
            "or_ci_high": 2.383,
            "strata_used": 11,
            "strata_dropped": 2,
            "confidence": 0.95,
        },
        "share_p_value": 0.0421,
        "escrows": 11,
    }
    assert document["provenance"] == {
        "sources": [
            {
                "source_id": "5f0c1a2e-lineage",
                "source_kind": "postgres",
                "label": "host-a devshard",
                "copy_at": "2026-10-26T19:35:00Z",
                "input_digest": "sha256:" + "0123456789abcdef" * 4,
            },
            {
                "source_id": "/data/copies/store-b",
                "source_kind": "sqlite",
                "label": None,
                "copy_at": "2026-10-26T20:00:30Z",
            },
        ],
        "run_ids": ["run-0007", "run-0008"],
        "window": {"since": "2026-10-25T23:06:00Z", "until": "2026-10-26T12:48:00Z"},
        "quarantined_rows": 3,
        "command": provenance().command,
        "pipeline_version": "0.1.0",
        "failed_runs": [],
        "escrow_findings": [],
    }


def test_json_nan_inf_and_missing_provenance():
    result = EvidenceResult(
        "x",
        "T",
        {"k": float("inf")},
        pl.DataFrame({"r": [math.inf, -math.inf, 1.0]}),
        stats={"cmh": CMHResult(math.nan, math.nan, math.nan, math.nan, math.nan, 0, 4)},
    )
    text = render(result, "json")
    assert "NaN" not in text and "Infinity" not in text
    assert orjson.loads(text) == {
        "evidence": "x",
        "params": {"k": None},
        "rows": [{"r": None}, {"r": None}, {"r": 1.0}],
        "stats": {
            "cmh": {
                "test": "Cochran–Mantel–Haenszel",
                "alternative": "two-sided",
                "correction": "not applicable (no test)",
                "df": 1,
                "or_ci_method": "Robins–Breslow–Greenland",
                "statistic": None,
                "p_value": None,
                "pooled_odds_ratio": None,
                "or_ci_low": None,
                "or_ci_high": None,
                "strata_used": 0,
                "strata_dropped": 4,
                "confidence": 0.95,
            }
        },
        "provenance": None,
    }


def test_json_empty_rows():
    result = EvidenceResult("x", "T", {}, pl.DataFrame(schema={"a": pl.Int64}))
    assert orjson.loads(render(result, "json"))["rows"] == []


EXPECTED_TABLE = """\
Validator votes on other hosts' answers
build                    valid   invalid      judged         invalid_rate   mean_accepted   validators
────────────────────────────────────────────────────────────────────────────────────────────────────────────
V1, no DSpark              330        60   1,234,567   0.71% (0.43–1.17%)           2.861   gonka1x, gonka1y
V2 + DSpark | vLLM fix     206        17           0                    –               –   –

fisher: Fisher exact, two-sided: p = 3.20e-07, OR 0.1739
cmh: Cochran–Mantel–Haenszel, two-sided, correction: continuity 0.5: χ² = 12.50 (1 df), p = 4.03e-04, pooled OR 2.174 \
(95% CI 1.984–2.383,
Robins–Breslow–Greenland), strata: 11 used, 2 dropped
share_p_value: 0.0421
escrows: 11
The windows judge different answers; sample sizes vary.

source: host-a devshard (postgres), copy 2026-10-26T19:35:00Z, input sha256:0123456789abcdef
source: store-b (sqlite), copy 2026-10-26T20:00:30Z
window: [2026-10-25T23:06:00Z, 2026-10-26T12:48:00Z)
runs: run-0007, run-0008
quarantined rows: 3
pipeline: gonka-evidence 0.1.0
command: gonka-evidence evidence votes-by-build --host gonka1abc \
--since 2026-10-25T23:06:00Z --until 2026-10-26T12:48:00Z"""


def test_table_exact():
    result = votes_result()
    result.rows = result.rows.drop("first_vote_at")
    assert render_table(result, width=140) == EXPECTED_TABLE


def test_table_empty_rows_has_no_escape_codes():
    result = EvidenceResult("x", "T [draft]", {}, pl.DataFrame(schema={"a": pl.Int64}))
    text = render_table(result, width=80)
    assert text == "T [draft]\nno rows"
    assert "\x1b" not in render_table(votes_result(), width=200)


def test_registry():
    assert FORMATS == ("markdown", "csv", "json", "table")
    with pytest.raises(ValueError, match="unknown format 'html'"):
        render(votes_result(), "html")


# -- untrusted text in Markdown ------------------------------------------------------------------------------

HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[click](javascript:alert(1))",
    "![x](javascript:alert(1))",
    "<javascript:alert(1)>",
    "a | b",
    "back\\slash \\| pipe",
    "&lt;b&gt; &#60;i&#62;",
    "two\nlines",
    "*em* **strong** _em_ __strong__ ~~struck~~",  # emphasis and strikethrough: shown as typed
    "snake_case_label stays_as_is_",
]


def parse_markdown(text: str):
    """GitHub-like parse (CommonMark with raw HTML allowed, tables), every link kept however unsafe."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    md.validateLink = lambda url: True
    return md.parse(text)


def injected(tokens, allowed_links=(), *, emphasis=False) -> list[str]:
    """Raw HTML, links (other than those whose target starts with one of ``allowed_links``) and, unless
    `emphasis` (a template's own bold captions), emphasis and strikethrough in the parse."""
    flagged = ("html_inline", "html_block", "image") + (() if emphasis else ("em_open", "strong_open", "s_open"))
    found = []
    for token in tokens:
        for t in [token, *(token.children or [])]:
            if t.type in flagged:
                found.append(f"{t.type}: {t.content}")
            if t.type == "link_open" and not str(t.attrs.get("href", "")).startswith(tuple(allowed_links)):
                found.append(f"link: {t.attrs.get('href')}")
    return found


def table_rows(tokens) -> list[list[str]]:
    """The text of every table cell, row by row (what a reader sees)."""
    rows, row, inside = [], None, False
    for token in tokens:
        if token.type == "tr_open":
            row = []
        elif token.type in ("th_open", "td_open"):
            inside = True
        elif token.type == "inline" and inside:
            row.append("".join(c.content for c in token.children or []))
            inside = False
        elif token.type in ("th_close", "td_close") and inside:  # an empty cell has no inline token
            row.append("")
            inside = False
        elif token.type == "tr_close":
            rows.append(row)
    return rows


def hostile_result() -> EvidenceResult:
    result = EvidenceResult(
        "votes-by-build",
        f"Verdicts of {HOSTILE[0]}",
        {},
        pl.DataFrame({"build": HOSTILE, "valid": range(len(HOSTILE))}),
        stats={"fisher_by_build": {label: {"p_value": 0.5} for label in HOSTILE[:3]}},
        notes=[f"host {label} validated nothing." for label in HOSTILE],
        provenance=provenance(),
    )
    result.provenance.sources[0]["label"] = HOSTILE[1]
    result.provenance.command = f"gonka-evidence evidence votes-by-build --host '{HOSTILE[2]}``'"
    return result


def test_markdown_escapes_untrusted_text():
    text = render(hostile_result(), "markdown")
    tokens = parse_markdown(text)
    assert injected(tokens) == []
    rows = table_rows(tokens)
    assert rows[0] == ["build", "valid"]
    # Each label is one cell, shown exactly as it is (a newline becomes a space), and the table keeps two columns.
    assert [r[0] for r in rows[1:]] == [label.replace("\n", " ") for label in HOSTILE]
    assert all(len(r) == 2 for r in rows)
    outside_code = text.rsplit("\n", 1)[0]  # all but the command line
    assert "<script" not in outside_code and "<img" not in outside_code and "](" not in outside_code.replace("\\](", "")
    # The command stays a code span, literal whatever it holds.
    spans = [c.content for t in tokens for c in t.children or [] if c.type == "code_inline"]
    assert spans == [hostile_result().provenance.command]


def test_a_backtick_in_a_label_is_shown_as_itself_in_a_cell_and_the_provenance():
    """A label's backticks opened a code span, in which the other escapes showed as backslashes: "a`b*c`" read
    "ab\\*c" in its cell. A cell and a provenance value hold data only: their backticks are escaped."""
    labels = ["a`b*c`", "x`_y_`", "`\\`", "``two``"]
    result = EvidenceResult(
        "votes-by-build",
        "Verdicts",
        {},
        pl.DataFrame({"build": labels, "valid": range(len(labels))}),
        provenance=provenance(),
    )
    result.provenance.sources[0]["label"] = labels[0]
    tokens = parse_markdown(render(result, "markdown"))
    assert [r[0] for r in table_rows(tokens)[1:]] == labels
    seen = ["".join(c.content for c in t.children or []) for t in tokens if t.type == "inline"]
    assert any(line.startswith(f"source: {labels[0]} (") for line in seen)


def test_markdown_escaping_keeps_ordinary_text():
    from pipeline.output.render.markdown import escape

    for text in (
        "V2 + DSpark, processed_logprobs, vLLM fix",
        "p < 1e-300",
        "[since, until)",
        "{'epochs': [3, 2]}",
        "(`gonka-evidence ingest-logs` first)",
        "x > y & z",
        "acceptance_rate, assigned_nonces",
    ):
        assert escape(text) == text
