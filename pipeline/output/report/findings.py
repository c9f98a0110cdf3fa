"""The main findings that open the epoch report: what a governance reviewer asks first, each
number next to its denominator and its interval (method and level named), each pointing at the
section it comes from (docs/evidence.md explains every number).

Findings are read from the `EvidenceResult` of the sections already computed: nothing is
counted again and no SQL runs here. A finding whose section was skipped says so in one line
(its reason); a section with nothing to say about the finding (no verdicts, no log windows)
gives no finding rather than an empty one.

The findings, in order (`FINDINGS`): the host's answers challenged or invalidated
(peer-invalidation) and its inferences that ended invalidated (epoch-summary); the other
executors' answers in the same escrows and the tests between them (peer-invalidation); the
host's verdicts on other hosts' answers per build and the test between builds (votes-by-build);
its timed-out inferences (epoch-summary); engine deaths and OOMs (stability) and
speculative-decoding acceptance (acceptance), which need the host's vLLM logs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import polars as pl

from pipeline.evidence.result import EvidenceResult
from pipeline.evidence.stats import CONFIDENCE, WILSON, wilson_interval
from pipeline.output.render.text import format_number, format_percent, format_value, p_phrase

NO_DATA = "no data for this epoch: "  # how the report starts the reason of a section without rows


@dataclass(frozen=True)
class Finding:
    label: str  # what the finding is about, the text of the link to its section (fixed text, never data)
    text: str  # one line: counts with their denominators, rates with their intervals, tests
    section: str  # key of the section it summarises (`Section.key`, the HTML id)
    # Its `backquoted` parts are commands (a skipped section's reason); otherwise every character of it is
    # literal, a backtick in a build label included.
    commands: bool = False


# The sections the findings read, and what each finding is called when its section was skipped.
SKIPPED_LABELS = {
    "peer-invalidation": "The host's answers against the other executors",
    "epoch-summary": "The host's inferences",
    "votes-by-build": "The host's verdicts by build",
    "stability": "Engine deaths and OOMs",
    "acceptance": "Speculative-decoding acceptance",
}


def epoch_findings(results: Mapping[str, EvidenceResult], skipped: Mapping[str, str]) -> list[Finding]:
    """The report's findings from the computed results (by evidence name) and the reasons of skipped sections."""
    findings, said = [], set()
    for key, build in FINDINGS:
        if key in skipped and key not in said:
            reason = skipped[key].removeprefix(NO_DATA).rstrip(".")
            findings.append(Finding(SKIPPED_LABELS[key], f"not measured: {reason}", key, commands=True))
            said.add(key)
        elif key in results:
            findings += [_marked(f, results[key]) for f in build(results[key])]
    return findings


def _marked(finding: Finding, result: EvidenceResult) -> Finding:
    """`finding` marked provisional when its section covers an open epoch: every statistic of an open epoch
    says so where it is quoted, the report's first lines included."""
    open_epochs = (result.params.get("closure") or {}).get("open_epochs") or []
    if not open_epochs:
        return finding
    which = f"epoch {open_epochs[0]} is" if len(open_epochs) == 1 else f"epochs {', '.join(map(str, open_epochs))} are"
    return replace(finding, text=f"{finding.text} (provisional: {which} open)")


# --- numbers as the findings print them ------------------------------------------------------------------


def interval_name(stat: Mapping[str, Any] | None) -> str:
    """``Wilson score 95%``: the method and level of a table's ``interval`` statistic."""
    stat = stat or {"interval": WILSON, "level": CONFIDENCE}
    return f"{stat['interval']} {stat['level'] * 100:g}%"


def share(count: int, whole: int, noun: str, low: float | None, high: float | None, method: str) -> str:
    """``31 of 49 answers (63.27%, Wilson score 95%: 49.27–75.33%)``; a whole of zero has no share."""
    text = f"{count:,} of {whole:,} {noun}"
    if not whole:
        return text
    return text + f" ({format_percent(count / whole)}, {interval_text(low, high, method, percent=True)})"


def interval_text(low: float | None, high: float | None, method: str, percent: bool = False) -> str:
    """``Wilson score 95%: 49.27–75.33%``, or ``no Wilson score 95% interval`` when it is not defined."""
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return f"no {method} interval"
    if percent:
        return f"{method}: {low * 100:.2f}–{format_percent(high)}"
    return f"{method}: {format_number(low)}–{format_number(high)}"


def p_text(test: Mapping[str, Any]) -> str:
    """``p = 3.14e-17 (Holm p = 6.28e-17)``, or ``p undefined`` when the test had no data."""
    p = test.get("p_value")
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "p undefined" + (f" ({test['note']})" if test.get("note") else "")
    return p_phrase(p, test.get("p_holm"))


def _series(parts: list[str]) -> str:
    return "; ".join(parts)


# --- one function per finding ---------------------------------------------------------------------------


def pooled(result: EvidenceResult) -> dict[str, dict]:
    """peer-invalidation's pooled rows by group (the report asks for per-escrow rows too)."""
    rows = result.rows
    if "escrow_id" in rows.columns:
        rows = rows.filter(pl.col("escrow_id") == "all")
    return {row["group"]: row for row in rows.iter_rows(named=True)}


def _host_answers(result: EvidenceResult) -> Iterator[Finding]:
    if (host := pooled(result).get("host")) is None:
        return
    method = interval_name(result.stats.get("interval"))
    yield Finding(
        "The host's answers",
        share(host["challenged_or_invalidated"], host["answers"], "answers", host["ci_low"], host["ci_high"], method)
        + " challenged or invalidated (challenges later cleared included)",
        result.evidence,
    )


def _others_and_tests(result: EvidenceResult) -> Iterator[Finding]:
    if (others := pooled(result).get("others")) is None:
        return
    method = interval_name(result.stats.get("interval"))
    yield Finding(
        "Other executors in the same escrows",
        share(
            others["challenged_or_invalidated"],
            others["answers"],
            "answers",
            others["ci_low"],
            others["ci_high"],
            method,
        )
        + f" challenged or invalidated, in the {_count(others['escrows'], 'escrow')} where the host answered",
        result.evidence,
    )
    stats, tests = result.stats, []
    if "fisher" in stats:
        tests.append(
            f"Fisher exact (two-sided) {p_text(stats['fisher'])}, OR {format_value(stats['fisher']['odds_ratio'])}"
        )
    if "cmh" in stats:
        cmh = stats["cmh"]
        text = f"Cochran–Mantel–Haenszel by escrow (two-sided, continuity-corrected) {p_text(cmh)}"
        if "pooled_odds_ratio" in cmh:
            text += f", pooled OR {format_value(cmh['pooled_odds_ratio'])}"
        if _defined(cmh.get("or_ci_low")) and _defined(cmh.get("or_ci_high")):
            text += (
                f" ({cmh.get('confidence', CONFIDENCE) * 100:g}% CI {format_value(cmh['or_ci_low'])}–"
                f"{format_value(cmh['or_ci_high'])})"
            )
        tests.append(text)
    if "breslow_day" in stats:
        tests.append(f"Breslow–Day (one odds ratio in every escrow) {p_text(stats['breslow_day'])}")
    if tests:
        yield Finding("Host against the others, tests", _series(tests), result.evidence)


def _measures(result: EvidenceResult) -> dict[str, dict] | None:
    """epoch-summary's long form (the report asks for it) by measure; None without rows."""
    if "measure" not in result.rows.columns or result.rows.height == 0:
        return None
    return {row["measure"]: row for row in result.rows.iter_rows(named=True)}


def _measure(measures: dict[str, dict], measure: str, noun: str) -> str:
    """A count of epoch-summary with its whole and a Wilson interval: that table has no interval
    columns, so the interval is the one every other share of the report uses."""
    n, whole = measures[measure]["count"], measures[measure]["of"]
    low, high = wilson_interval(n, whole) if whole else (None, None)
    return share(n, whole, noun, low, high, interval_name(None))


def _host_invalidated(result: EvidenceResult) -> Iterator[Finding]:
    if (measures := _measures(result)) is None:
        return
    if not measures["invalidated"]["of"]:
        yield Finding("The host's inferences", "the host executed no inference in this epoch", result.evidence)
        return
    cleared = measures["cleared"]
    challenges = (
        f"{cleared['count']:,} of {cleared['of']:,} challenged cleared by the vote"
        if cleared["of"]
        else "none challenged"
    )
    yield Finding(
        "The host's inferences",
        f"{_measure(measures, 'invalidated', 'executed inferences')} ended invalidated; {challenges}",
        result.evidence,
    )


def _timeouts(result: EvidenceResult) -> Iterator[Finding]:
    measures = _measures(result)
    if measures is None or not measures["timed_out"]["of"]:
        return
    yield Finding(
        "Timeouts and misses",
        f"{_measure(measures, 'timed_out', 'executed inferences')} timed out "
        "(refusals, execution timeouts, error misses)",
        result.evidence,
    )


def _votes_by_build(result: EvidenceResult) -> Iterator[Finding]:
    rows = result.rows
    method = interval_name(result.stats.get("interval"))
    silent = []
    for build in rows["build"].unique(maintain_order=True).to_list():
        kinds = rows.filter((pl.col("build") == build) & (pl.col("total") > 0))
        if kinds.height == 0:
            silent.append(build)
            continue
        parts = [
            share(
                r["invalid"],
                r["total"],
                "validations invalid" if r["kind"] == "validation" else "votes invalid",
                r["ci_low"],
                r["ci_high"],
                method,
            )
            for r in kinds.iter_rows(named=True)
        ]
        yield Finding("The host's verdicts by build", f"under {build}: " + _series(parts), result.evidence)
    if silent and len(silent) == rows["build"].n_unique():
        yield Finding("The host's verdicts by build", f"none cast (builds: {', '.join(silent)})", result.evidence)
        return
    between = result.stats.get("between_builds") or {}
    tests = [
        f"{'validations' if kind == 'validation' else 'votes'}: {_between_text(test)}" for kind, test in between.items()
    ]
    if silent:
        tests.append(f"no verdicts under {', '.join(silent)}")
    if tests:
        yield Finding("Invalid share between builds", _series(tests), result.evidence)


def _between_text(test: Mapping[str, Any]) -> str:
    if not _defined(test.get("p_value")):
        return f"not tested ({test.get('note') or 'nothing to compare'})"
    text = f"{test['test']} (two-sided) {p_text(test)}, {test['groups']} builds"
    return text + (f" ({test['note']})" if test.get("note") else "")


def _stability(result: EvidenceResult) -> Iterator[Finding]:
    for row in result.rows.iter_rows(named=True):
        text = (
            f"under {row['build']}: {_count(row['engine_deaths'], 'engine death')} ({row['ooms']:,} OOM), "
            f"{_count(row['restarts'], 'restart')}"
        )
        if row["preemptions"] is not None:
            text += f", {_count(row['preemptions'], 'preemption')}"
        yield Finding(
            "Engine deaths and OOMs",
            text + f" in {format_number(row['hours_observed'])} hours of logs",
            result.evidence,
        )


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _acceptance(result: EvidenceResult) -> Iterator[Finding]:
    boot = result.stats.get("bootstrap") or {}
    method = interval_name(boot) + (f" over {boot['unit']}" if boot.get("unit") else "")
    for row in result.rows.iter_rows(named=True):
        if row["mean_acceptance_length"] is None or not row["drafted"]:
            continue
        yield Finding(
            "Speculative-decoding acceptance",
            (
                f"under {row['build']}: mean acceptance length {format_number(row['mean_acceptance_length'])} "
                f"tokens per step ({interval_text(row['mal_boot_low'], row['mal_boot_high'], method)}) "
                f"over {row['drafts']:,} drafts "
                f"in {row['windows']:,} windows; "
                + share(
                    row["accepted"],
                    row["drafted"],
                    "drafted tokens",
                    row["rate_boot_low"],
                    row["rate_boot_high"],
                    method,
                )
                + " accepted"
            ),
            result.evidence,
        )


def _defined(value: Any) -> bool:
    return isinstance(value, (int, float)) and not math.isnan(value)


# (section, finding) in the order a reviewer reads them.
FINDINGS: tuple[tuple[str, Callable[[EvidenceResult], Iterator[Finding]]], ...] = (
    ("peer-invalidation", _host_answers),
    ("epoch-summary", _host_invalidated),
    ("peer-invalidation", _others_and_tests),
    ("votes-by-build", _votes_by_build),
    ("epoch-summary", _timeouts),
    ("stability", _stability),
    ("acceptance", _acceptance),
)
