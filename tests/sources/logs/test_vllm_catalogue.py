"""The death and OOM catalogue (pipeline/sources/logs/vllm_catalogue.toml, derived from vLLM's source by
bench/vllm_catalogue.py): every entry, written into a log line as vLLM prints it, is read as its kind, both as a
record's message and inside a traceback; nothing else in the reader decides what a death or an OOM is.
"""

from __future__ import annotations

import datetime as dt
import re
import tomllib
from importlib.resources import files

import pytest

from pipeline.sources.logs import catalogue
from pipeline.sources.logs.files import LogFile
from pipeline.sources.logs.vllm import parse_vllm_log

ENTRIES = catalogue.ENTRIES
FILL = "EngineCore_DP1"  # what a placeholder of vLLM's source stands for in a printed line (a name, a pid)


def _printed(entry: catalogue.Entry) -> str:
    return entry.text.replace("{}", FILL)


def test_the_catalogue_ships_in_the_package_and_covers_the_issue_texts():
    raw = tomllib.loads(files("pipeline.sources.logs").joinpath("vllm_catalogue.toml").read_text("utf-8"))
    assert len(raw["entry"]) == len(ENTRIES) >= 40
    texts = {e.text for e in ENTRIES}
    for text in (
        "AsyncLLMEngine is already dead, terminating server process",
        "MQLLMEngine is already dead, terminating server process",
        "Engine process (pid {}) died.",
        "Engine process failed to start",
        "Process EngineCore{}:",
        "CUDA driver error: out of memory",
        "NPU out of memory.",
        "is larger than the maximum number of tokens that can be stored in KV cache",
    ):
        assert text in texts


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.text[:50] for e in ENTRIES])
def test_entry_metadata(entry):
    """vLLM's own texts carry the releases and files they were found in; texts of the runtime name their source."""
    assert entry.kind == ("oom" if entry.event == "oom" else "death")
    if entry.origin in ("vllm", "vllm-ascend"):
        assert entry.files and all(f.endswith(".py") and "/" in f for f in entry.files), entry.text
        if entry.note:  # newer than the scanned releases: where it was read, no release range yet
            assert entry.since is None and entry.until is None and "commit" in entry.note
            return
        assert entry.since and entry.until, entry.text
        key = [tuple(int(p) for p in re.findall(r"\d+", v)[:3]) for v in (entry.since, entry.until)]
        assert key[0] <= key[1] and key[0] >= (0, 4, 0)
    else:
        assert entry.origin == "runtime" and entry.source


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.text[:50] for e in ENTRIES])
def test_a_line_built_from_each_entry_is_its_kind(entry):
    line = f"ERROR 12-03 10:00:00 [core.py:1] {_printed(entry)}"
    assert catalogue.classify(line) == [entry.kind]
    assert re.search(entry.regex, line) and entry.literal in line


def test_every_entry_gives_its_event_in_a_log(tmp_path):
    """One log holding every entry as a record's message (each its own launch, so each is its own death) and,
    for the death texts, inside a traceback of a plain ERROR record: the event kinds the catalogue says."""
    lines, expect = [], []
    for i, entry in enumerate(ENTRIES):
        stamp = f"12-03 10:{i // 60:02d}:{i % 60:02d}"
        lines.append(f"INFO {stamp} [api_server.py:1] vLLM API server version 0.11.1")
        lines.append(f"ERROR {stamp} [x.py:1] {_printed(entry)}")
        expect.append((len(lines), entry.event))
    for entry in ENTRIES:
        if entry.kind == "death" and entry.event != "fatal":
            lines.append("INFO 12-03 11:00:00 [api_server.py:1] vLLM API server version 0.11.1")
            lines.append("ERROR 12-03 11:00:00 [x.py:1] Exception in worker")
            lines.append("Traceback (most recent call last):")
            lines.append(f"RuntimeError: {_printed(entry)}")
            expect.append((len(lines) - 2, "engine_dead"))
    path = tmp_path / "catalogue.log"
    path.write_text("\n".join(lines) + "\n")
    parsed = parse_vllm_log(LogFile(path, dt.datetime(2025, 12, 31, tzinfo=dt.UTC)), 2025)
    got = {(e["line"], e["kind"]) for e in parsed.events if e["kind"] != "launch"}
    assert got >= set(expect)
    deaths = {line for line, kind in got}
    assert deaths == {line for line, _ in expect}  # nothing else is an event
    assert parsed.unparsed == []


def test_plain_lines_are_not_deaths():
    for line in (
        "INFO 12-03 10:00:00 [core.py:1] Engine core started; worker processes are alive",
        "INFO 12-03 10:00:00 [gpu_worker.py:1] Available KV cache memory: 18.83 GiB",
        "INFO 12-03 10:00:00 [x.py:1] Process EngineCore_DP0 (PID: 77) started",
        "WARNING 12-03 10:00:00 [x.py:1] To avoid OOM, lower --max-num-seqs",
    ):
        assert catalogue.classify(line) == []
