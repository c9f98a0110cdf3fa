"""The build timeline against the vLLM logs: `builds infer` proposes a builds.toml from the start cycles
(engine_cycles), `builds check` names where a timeline contradicts them.

A build segment is a run of consecutive start cycles of one host with one fingerprint (what the start lines
state); a new segment starts at a restart with a config change. A timeline contradicts the logs where

- an entry's boundary has no restart near it (`NEAR`),
- a restart changes the config and no boundary is near it,
- an entry's boundary and such a restart with none between them are the same change written at the wrong
  time (a shifted boundary: one line for both),
- a label says speculative decoding (names a method, "DSpark", "spec") and every cycle of its entry has none,
  or says "no <method>" and every cycle has one, or names a method the cycles do not run,
- a label names a vLLM version (`vLLM 0.23`, `v0.23.1`) no cycle of its entry runs.

Entries before the logs begin or after they end are not checked (`BuildCheck.notes` says so); what the logs
do not state (a patched image, an environment switch that prints nothing) cannot contradict them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl

from pipeline.core.paths import sql_text
from pipeline.core.times import iso_utc
from pipeline.warehouse.database import fetch_frame

NEAR = timedelta(minutes=30)  # a boundary this close to a restart is at that restart
# config keys a label names first, in this order; any other key that differs between segments follows
_SPEC_WORDS = r"dspark|eagle3?|mtp|ngram|medusa|suffix|draft[_ ]model|spec(?:ulative)?(?:[ _]decod\w*)?"
_RX_SPEC = re.compile(rf"\b(?P<no>no |without |w/o )?(?P<word>{_SPEC_WORDS})\b", re.IGNORECASE)
_RX_VERSION = re.compile(r"\bvllm[ -]?v?(\d+\.\d+(?:\.\d+)?)|\bv(\d+\.\d+\.\d+)\b", re.IGNORECASE)
# vLLM's defaults of keys a label may name when one segment sets them and another does not
DEFAULTS = {"logprobs_mode": "raw_logprobs", "spec_method": "none"}
_SHORT = {
    "tensor_parallel_size": "TP",
    "data_parallel_size": "DP",
    "pipeline_parallel_size": "PP",
}


@dataclass
class Segment:
    """Consecutive start cycles of one host with one fingerprint."""

    host: str
    fingerprint: str
    config: dict[str, str]
    starts: list[datetime]
    ended_at: datetime | None
    lines: list[str]  # `path:line (what it states)` of the first cycle's start lines


@dataclass
class BuildCheck:
    """`builds check`: the contradictions (one line each) and what could not be checked."""

    contradictions: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.contradictions


def segments(con: duckdb.DuckDBPyConnection, host: str | None = None) -> list[Segment]:
    """The build segments of every host with start cycles (or of `host`), in host and time order."""
    cycles = fetch_frame(con, sql_text("evidence/engine_cycles.sql"), {"host": host})
    lines = _line_names(con, host)
    out: list[Segment] = []
    for row in cycles.iter_rows(named=True):
        last = out[-1] if out else None
        if last is not None and last.host == row["host"] and last.fingerprint == row["fingerprint"]:
            last.starts.append(row["started_at"])
            last.ended_at = row["ended_at"]
            continue
        out.append(
            Segment(
                row["host"],
                row["fingerprint"],
                json.loads(row["config"]),
                [row["started_at"]],
                row["ended_at"],
                [lines.get(key, key) for key in row["lines"]],
            )
        )
    return out


def _line_names(con: duckdb.DuckDBPyConnection, host: str | None) -> dict[str, str]:
    """record_key → `file name:line (what the line is)` of the start lines."""
    names = fetch_frame(con, sql_text("evidence/engine_cycle_lines.sql"), {"host": host})
    what = {"server": "vLLM API server version", "args": "non-default args", "config": "engine config"}
    return {
        key: f"{Path(path or file_id).name}:{line} ({what.get(part, part)})"
        for key, path, file_id, line, part in names.iter_rows()
    }


def labels(segs: list[Segment]) -> list[str]:
    """A readable label per segment of one host from what differs between its segments: always the version
    and the speculative config, then every other key whose value differs (`TP2`, `processed_logprobs`, …)."""
    keys = sorted({k for s in segs for k in s.config})
    differing = [k for k in keys if len({s.config.get(k, DEFAULTS.get(k)) for s in segs}) > 1]
    out = []
    for s in segs:
        c = s.config
        parts = [f"vLLM {c['vllm_version']}" if "vllm_version" in c else "vLLM version not logged"]
        method = c.get("spec_method", "none")
        parts.append("no spec decode" if method == "none" else f"{method} K={c.get('spec_tokens', '?')}")
        for k in differing:
            if k in ("vllm_version", "spec_method", "spec_tokens"):
                continue
            value = c.get(k, DEFAULTS.get(k))
            if value is None:
                parts.append(f"no {k}")
            elif k in _SHORT:
                parts.append(f"{_SHORT[k]}{value}")
            elif k == "logprobs_mode":
                parts.append(value)
            else:
                parts.append(f"{k}={value}")
        out.append(", ".join(parts))
    return out


def infer(con: duckdb.DuckDBPyConnection, host: str | None = None) -> str:
    """A proposed builds.toml: one entry per build segment, since = its first start, with a comment on
    the log lines it rests on. Empty of entries (a comment only) when the logs hold no start cycle."""
    segs = segments(con, host)
    out = [
        "# Proposed by `gonka-evidence builds infer` from the start cycles of the vLLM logs (engine_cycles).",
        "# Each entry starts at the first start of a configuration; its label names what differs between the",
        "# host's builds. What the logs do not state (a patched image, an environment switch that prints",
        "# nothing) is yours to add to the labels.",
    ]
    if not segs:
        return "\n".join([*out, "# (no start cycles in the warehouse's vLLM logs)", ""])
    for h in dict.fromkeys(s.host for s in segs):
        mine = [s for s in segs if s.host == h]
        for seg, label, prev in zip(mine, labels(mine), [None, *mine[:-1]], strict=True):
            cycles = len(seg.starts)
            out += ["", "[[builds]]"]
            out.append(
                f"# fingerprint {seg.fingerprint}: {cycles} start cycle{'s' if cycles > 1 else ''} "
                f"from {iso_utc(seg.starts[0])}" + (f" to {iso_utc(seg.ended_at)}" if seg.ended_at else "")
            )
            out.append("# rests on " + (", ".join(seg.lines) or "the start line alone"))
            if prev is not None:
                out.append("# changed: " + _changes(prev.config, seg.config))
            out += [f"host  = {_toml(h)}", f"label = {_toml(label)}", f"since = {_toml(iso_utc(seg.starts[0]))}"]
    return "\n".join(out) + "\n"


def _toml(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _changes(before: dict[str, str], after: dict[str, str]) -> str:
    keys = sorted(k for k in {*before, *after} if before.get(k) != after.get(k))
    return "; ".join(f"{k} {before.get(k, '–')} → {after.get(k, '–')}" for k in keys)


def loaded_timeline(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """The warehouse's build timeline (host_builds) as `check` takes it."""
    return fetch_frame(con, sql_text("evidence/build_timeline.sql"))


def check(con: duckdb.DuckDBPyConnection, timeline: pl.DataFrame, host: str | None = None) -> BuildCheck:
    """The timeline (host, build, valid_from; `read_builds` or host_builds) against the build segments."""
    result = BuildCheck()
    segs = segments(con, host)
    hosts = sorted(set(timeline["host"].to_list()) if host is None else {host})
    for h in hosts:
        entries = timeline.filter(pl.col("host") == h).sort("valid_from")
        mine = [s for s in segs if s.host == h]
        if not mine:
            result.notes.append(f"{h}: no vLLM start cycles in the warehouse: its builds are not checked")
            continue
        if not entries.height:
            result.notes.append(f"{h}: the logs have start cycles but the timeline has no entry for the host")
            continue
        _check_host(h, entries, mine, result)
    return result


def _check_host(host: str, entries: pl.DataFrame, segs: list[Segment], result: BuildCheck) -> None:
    starts = [t for s in segs for t in s.starts]
    first, last = starts[0], segs[-1].ended_at or starts[-1]
    rows = list(entries.iter_rows(named=True))
    for e in rows:
        if e["valid_from"] < first - NEAR:
            result.notes.append(
                f"{host}: {e['build']!r} since {iso_utc(e['valid_from'])} begins before the logs "
                f"({iso_utc(first)}): its boundary is not checked"
            )
    # boundaries: every entry after the first, and the first when it lies inside the logs
    bounds = [e for i, e in enumerate(rows) if (i > 0 or e["valid_from"] > first + NEAR) and e["valid_from"] <= last]
    changes = [(prev, seg) for prev, seg in zip(segs, segs[1:], strict=False)]
    near = [any(abs(t - e["valid_from"]) <= NEAR for t in starts) for e in bounds]
    covered = [any(abs(seg.starts[0] - e["valid_from"]) <= NEAR for e in bounds) for _, seg in changes]
    lone_bounds = [(i, e) for i, (e, ok) in enumerate(zip(bounds, near, strict=True)) if not ok]
    lone_changes = [c for c, ok in zip(changes, covered, strict=True) if not ok]
    matched = [e["valid_from"] for e, ok in zip(bounds, near, strict=True) if ok]
    for _, e in lone_bounds:
        pair = _pair(e["valid_from"], lone_changes, matched)
        if pair is not None:
            lone_changes.remove(pair)
            prev, seg = pair
            delta = e["valid_from"] - seg.starts[0]
            result.contradictions.append(
                f"{host}: boundary of {e['build']!r} at {iso_utc(e['valid_from'])} is shifted: the logs' config "
                f"changes at the restart of {iso_utc(seg.starts[0])}, {_span(delta)} "
                f"{'earlier' if delta > timedelta(0) else 'later'} ({_changes(prev.config, seg.config)})"
            )
        else:
            nearest = min(starts, key=lambda t: abs(t - e["valid_from"]))
            result.contradictions.append(
                f"{host}: boundary of {e['build']!r} at {iso_utc(e['valid_from'])} has no restart within "
                f"{_span(NEAR)} in the vLLM logs (nearest start: {iso_utc(nearest)})"
            )
    for prev, seg in lone_changes:
        result.contradictions.append(
            f"{host}: the restart of {iso_utc(seg.starts[0])} changes the config "
            f"({_changes(prev.config, seg.config)}) but the timeline has no boundary near it"
        )
    for span in build_spans(entries, starts):  # the start cycles of each entry, as `preflight` attributes them
        configs = [s.config for s in segs for t in s.starts if t >= span.start and (span.end is None or t < span.end)]
        if configs:
            result.contradictions += [f"{host}: {line}" for line in _label_contradictions(span.build, configs)]


@dataclass(frozen=True)
class BuildSpan:
    """Where an entry of a host's timeline is in effect in the logs: from its boundary to the next one's."""

    build: str
    start: datetime  # the start cycle its boundary is at (`build_spans`), else its declared since
    end: datetime | None  # the next entry's start, or the entry's own valid_to; None: open


def build_spans(entries: pl.DataFrame, starts: list[datetime]) -> list[BuildSpan]:
    """The one attribution of a host's start cycles (and what they log) to its builds, for `builds check` and
    `preflight` alike: an entry's boundary with start cycles within `NEAR` of it (which `check` accepts as
    consistent) is at the nearest of them, else at its declared `since`; each entry lasts until the next
    one's boundary (or its own `valid_to` when that ends it earlier). `entries`: build, valid_from (valid_to
    optional) of one host; `starts`: the start times of all its cycles."""
    rows = sorted(entries.iter_rows(named=True), key=lambda e: e["valid_from"])
    bounds: list[datetime] = []
    for e in rows:
        declared = e["valid_from"]
        near = [t for t in starts if abs(t - declared) <= NEAR]
        at = min(near, key=lambda t: (abs(t - declared), t)) if near else declared
        bounds.append(at if not bounds or at > bounds[-1] else declared)  # never before the previous boundary
    spans = []
    for i, e in enumerate(rows):
        end = bounds[i + 1] if i + 1 < len(rows) else None
        own = e.get("valid_to")
        if own is not None and (i + 1 >= len(rows) or own < rows[i + 1]["valid_from"]):
            end = own  # the entry ends before the next begins
        spans.append(BuildSpan(e["build"], bounds[i], end))
    return spans


def attribute(times: list[datetime | None], spans: list[BuildSpan]) -> list[str | None]:
    """The build in effect at each time by `build_spans` (None outside every span)."""
    out: list[str | None] = []
    for t in times:
        span = None if t is None else next((s for s in reversed(spans) if s.start <= t), None)
        out.append(span.build if span is not None and t is not None and (span.end is None or t < span.end) else None)
    return out


def _pair(at: datetime, changes: list[tuple[Segment, Segment]], matched: list[datetime]):
    """The nearest unmatched config change with no matched boundary between it and `at`."""
    fits = [c for c in changes if not any(min(at, c[1].starts[0]) < m < max(at, c[1].starts[0]) for m in matched)]
    return min(fits, key=lambda c: abs(c[1].starts[0] - at), default=None)


def _span(delta: timedelta) -> str:
    seconds = abs(delta.total_seconds())
    return f"{seconds / 3600:g} h" if seconds >= 3600 else f"{seconds / 60:g} min"


def _label_contradictions(label: str, configs: list[dict[str, str]]) -> list[str]:
    """What a label claims that every start cycle of its entry contradicts."""
    out = []
    methods = {c.get("spec_method", "none") for c in configs}
    claims = list(_RX_SPEC.finditer(label))
    says_none = any(m.group("no") for m in claims)
    named = {m.group("word").lower() for m in claims if not m.group("no")}
    if named and methods == {"none"}:
        out.append(f"{label!r} says speculative decoding; the start lines of its cycles have none")
    elif says_none and "none" not in methods:
        out.append(f"{label!r} says no speculative decoding; its cycles run {', '.join(sorted(methods))}")
    else:
        concrete = {w for w in named if not w.startswith("spec")} - {"draft model", "draft_model"}
        if concrete and "none" not in methods and not any(_same_method(w, m) for w in concrete for m in methods):
            out.append(f"{label!r} names {', '.join(sorted(concrete))}; its cycles run {', '.join(sorted(methods))}")
    versions = {c.get("vllm_version") for c in configs} - {None}
    for m in _RX_VERSION.finditer(label):
        said = m.group(1) or m.group(2)
        if versions and not any(v == said or v.startswith(said + ".") for v in versions if v):
            out.append(f"{label!r} says vLLM {said}; its cycles run {', '.join(sorted(v for v in versions if v))}")
    return out


def _same_method(word: str, method: str) -> bool:
    word, method = word.lower(), method.lower()
    return word == method or (word == "eagle" and method.startswith("eagle"))
