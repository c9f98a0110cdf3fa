"""The vLLM log grammar (pipeline/sources/logs/vllm.py) on hard inputs.

The rows, their `at` and the stream state must not depend on where the file is cut into chunks:
generated logs of every supported vLLM version, the edge-case log of test_logs, and seeded random
mutations of real line shapes (numbers of every form, ANSI codes, process and free-text prefixes,
impossible stamps, event words inside records, duplicate lines, chunk boundaries everywhere) give
the same rows whatever the chunk size. Plus the line-level traps each with its expected rows.
"""

from __future__ import annotations

import datetime as dt
import random

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from pipeline.core.address import sample_address
from pipeline.sources.logs import vllm as vllm_logs
from pipeline.sources.logs.files import LogFile

UTC = dt.UTC
STATE = ("lines", "records", "unparsed", "rollovers", "last_month", "version", "first", "last", "base")


def _parse(file: LogFile, year, chunk_bytes: int) -> tuple[dict, vllm_logs.VllmStream]:
    st = vllm_logs.VllmStream(year)
    out: dict[str, list] = {k: [] for k in ("spec", "stats", "events", "unparsed")}
    for batch in vllm_logs.iter_vllm_batches(file, year, st, chunk_bytes):
        for name in out:
            frame = getattr(batch, name)
            if frame.width:
                out[name].append(frame)
    return {k: pl.concat(v) if v else None for k, v in out.items()}, st


def _same_at_every_cut(
    path, year=None, chunks=(vllm_logs.CHUNK_BYTES, 3000), mtime=dt.datetime(2026, 3, 1, tzinfo=UTC)
) -> dict:
    """The rows and state of the parse at each chunk size, which must all be equal; the first one's rows."""
    file = LogFile(path, mtime)
    first, st_first = _parse(file, year, chunks[0])
    for chunk in chunks[1:]:
        other, st_other = _parse(file, year, chunk)
        for name in first:
            assert (first[name] is None) == (other[name] is None), name
            if first[name] is not None:
                assert_frame_equal(
                    first[name].sort("line", maintain_order=True),
                    other[name].sort("line", maintain_order=True),
                    check_exact=True,
                )
        for attr in STATE:
            assert getattr(st_first, attr) == getattr(st_other, attr), attr
    return first


def test_generated_logs_of_every_version(tmp_path):
    from pipeline.samples.logs import write_log_samples

    write_log_samples(tmp_path, seed=11)
    files = sorted(p for p in tmp_path.rglob("*") if p.is_file() and "vllm" in p.name)
    assert files, "the sample generator wrote no vLLM logs"
    rows = 0
    for path in files:
        out = _same_at_every_cut(path)
        rows += sum(f.height for f in out.values() if f is not None)
    assert rows > 500


def test_edge_log(tmp_path):
    from tests.ingest.test_logs import EDGE_LOG

    path = tmp_path / "edge.log"
    path.write_bytes(EDGE_LOG * 3 + b"INFO 01-02 00:00:00 [x.py:1] PoC stopped: 1 nonces")
    _same_at_every_cut(path, chunks=(1 << 20, 64, 1000), mtime=dt.datetime(2027, 1, 2, tzinfo=UTC))


def _records(tmp_path, messages: list[str]) -> dict:
    """The rows of a log of one record per message (a minute apart, 2026), at every chunk cut."""
    path = tmp_path / "records.log"
    path.write_text(
        "".join(f"INFO 03-01 10:{i:02d}:00 [metrics.py:1] {msg}\n" for i, msg in enumerate(messages)),
        encoding="utf-8",
    )
    return _same_at_every_cut(path, year=2026, chunks=(vllm_logs.CHUNK_BYTES, 200))


def test_spec_line_085_semantics_and_draft_recovery(tmp_path):
    """0.8.5 prints MAL = accepted/drafts (no +1), later versions 1 + that: told apart by the per-position
    sum; `drafts` is recovered from MAL. A SpecDecoding record without Accepted/Drafted is unparsed."""
    line_085 = (
        "Draft acceptance rate: 52.4%, Mean acceptance length: 2.62, Accepted: 1310 tokens, Drafted: 2500 tokens, "
        "Per-position acceptance rate: 0.800, 0.700, 0.560, 0.340, 0.220"
    )
    line_091 = line_085.replace("Mean acceptance length: 2.62", "Mean acceptance length: 3.62")
    # 2-decimal MAL: recovery is approximate (1234 / 2.47 = 499.6 → 500); the counters are exact, logs are not.
    new = (
        "Mean acceptance length: 3.47, Accepted throughput: 123.40 tokens/s, Drafted throughput: 250.00 tokens/s, "
        "Accepted: 1234 tokens, Drafted: 2500 tokens, Per-position acceptance rate: 0.790, 0.640, 0.470, 0.330, nan, "
        "Avg Draft acceptance rate: 49.4%, top1: [0.5, 0.4]"
    )
    out = _records(tmp_path, [f"SpecDecoding metrics: {m}" for m in (line_085, line_091, new, "mal=3.1 acc=1000")])
    spec = out["spec"].to_dicts()
    assert [r["line"] for r in spec] == [1, 2, 3]
    assert spec[0]["mal_semantics"] == "no_plus1" and spec[0]["drafts"] == 500  # 1310 / 2.62
    assert spec[1]["mal_semantics"] == "plus1" and spec[1]["drafts"] == 500
    assert spec[2]["drafts"] == 500 and spec[2]["accepted"] == 1234 and spec[2]["drafted"] == 2500
    assert (
        spec[2]["per_position"][:4] == [0.79, 0.64, 0.47, 0.33]
        and spec[2]["per_position"][4] != spec[2]["per_position"][4]
    )
    assert spec[2]["accepted_tps"] == 123.4 and spec[2]["acceptance_rate_printed"] == 49.4
    assert out["unparsed"]["line"].to_list() == [4]


def test_stats_line_preemptions_by_version(tmp_path):
    """A missing `Preemptions:` field is unknown before 0.11.1 and 0 from it (and in an aggregated line);
    a printed one is read, as are the other fields by name."""
    base = (
        "Engine 000: Avg prompt throughput: 10.0 tokens/s, Avg generation throughput: 20.0 tokens/s, Running: 3 reqs, "
        "Waiting: 1 reqs{extra}, GPU KV cache usage: 45.5%, Prefix cache hit rate: 10.0%, MM cache hit rate: 1.0%"
    )
    out = _records(
        tmp_path,
        [
            "vLLM API server version 0.10.2",
            base.format(extra=""),
            "vLLM API server version 0.11.1",
            base.format(extra=""),
            base.format(extra=", Deferred: 2 reqs, Preemptions: 7"),
            "vLLM API server version 0.10.2",
            base.format(extra="").replace("Engine 000: ", "2 Engines Aggregated: "),
        ],
    )
    stats = {r["line"]: r for r in out["stats"].to_dicts()}
    assert sorted(stats) == [2, 4, 5, 7]
    assert stats[2]["preemptions"] is None  # unknown before 0.11.1
    assert stats[4]["preemptions"] == 0
    row = stats[5]
    assert row["preemptions"] == 7 and row["kv_cache_usage"] == pytest.approx(0.455) and row["waiting"] == 1
    assert row["engine"] == "0" and row["prefix_cache_hit_rate"] == pytest.approx(0.1)
    assert stats[7]["engine"] == "all" and stats[7]["preemptions"] == 0


NUMBERS = [
    "0",
    "7",
    "12.5",
    "-3.25",
    "nan",
    "00012",
    "3.",
    ".5",
    "1e5",
    "-",
    "123456789012345678",
    "1234567890123456789",
    "0.1000000000000000055511151231257827",
    "9" * 30 + ".5",
    "nanx",
    "12.5.3",
]
SPEC_FIELDS = [
    "Mean acceptance length: {}",
    "Accepted throughput: {} tokens/s",
    "Drafted throughput: {} tokens/s",
    "Accepted: {} tokens",
    "Drafted: {} tokens",
    "Draft acceptance rate: {}%",
    "Avg Draft acceptance rate: {}%",
    "Per-position acceptance rate: {}",
    "Unknown: {}",
]
STATS_FIELDS = [
    "Running: {} reqs",
    "Waiting: {} reqs",
    "Pending: {} reqs",
    "Swapped: {} reqs",
    "Preemptions: {}",
    "GPU KV cache usage: {}%",
    "Prefix cache hit rate: {}%",
    "CPU KV cache usage: {}%",
]
HEADS = ["", "Engine 000: ", "Engine 12: ", "2 Engines Aggregated: ", "Engine x: ", "Engine 001 "]
PREFIXES = [
    "",
    "(EngineCore_DP0 pid=2834) ",
    "\x1b[36m(EngineCore_DP0 pid=2834)\x1b[0m ",
    "(APIServer pid=1)",
    "(Bad pid=x) ",
    "[rank0]: ",
    "my-host | ",
]
LEVELS = ["INFO", "DEBUG", "WARNING", "ERROR", "CRITICAL", "\x1b[32mINFO\x1b[0m", "TRACE"]
EXTRAS = [
    "",
    " died unexpectedly",
    " version 1.2.3",
    ", LLM engine (v0.9.1)",
    " EngineDeadError",
    "\x1b[1m",
    " CUDA out of memory",
    ", Engine 000: x",
]


INT_FIELDS = ("Accepted:", "Drafted:", "Running", "Waiting", "Pending", "Swapped", "Preemptions")


def _number(rng, field: str = ""):
    if rng.random() < 0.15:
        return rng.choice(NUMBERS)
    if field.startswith(INT_FIELDS):
        return str(rng.randint(0, 5000))
    return str(round(rng.uniform(0, 500), rng.randint(0, 4)))


def _random_line(rng: random.Random, t: dt.datetime) -> str:
    kind = rng.random()
    stamp = t.strftime("%m-%d %H:%M:%S")
    if rng.random() < 0.02:
        stamp = rng.choice(
            [
                "13-01 00:00:00",
                "02-30 10:00:00",
                "04-31 23:59:59",
                "01-01 24:00:00",
                "01-01 10:60:00",
                "00-10 10:00:00",
                "1-01 10:00:00",
            ]
        )
    if rng.random() < 0.1:
        stamp += rng.choice([".123", ",5", ".", ""])
    env = f"{rng.choice(LEVELS)} {stamp} [{rng.choice(['loggers.py:118', 'metrics.py:86', 'a]b.py:1', ''])}] "
    if rng.random() < 0.02:
        env = env.replace("] ", "]")
    if kind < 0.4:
        fields = rng.sample(SPEC_FIELDS, rng.randint(0, len(SPEC_FIELDS)))
        if rng.random() < 0.8:  # mostly records that parse
            fields = ["Accepted: {} tokens", "Drafted: {} tokens"] + [
                f for f in fields if not f.startswith(("Acc", "Dra"))
            ]
        parts = []
        for f in fields:
            if f.startswith("Per-position"):
                parts.append(f.format(", ".join(_number(rng) for _ in range(rng.randint(1, 6)))))
            else:
                parts.append(f.format(_number(rng, f)))
        msg = "SpecDecoding metrics:" + rng.choice([" ", "", "  ", "\t", " \x1c"]) + ", ".join(parts)
    elif kind < 0.8:
        msg = (
            rng.choice(HEADS) + f"Avg prompt throughput: {_number(rng)} tokens/s, "
            f"Avg generation throughput: {_number(rng)} tokens/s"
        )
        fields = rng.sample(STATS_FIELDS, rng.randint(0, len(STATS_FIELDS)))
        if rng.random() < 0.8:
            fields = ["Running: {} reqs"] + [f for f in fields if not f.startswith("Running")]
        msg += "".join(", " + f.format(_number(rng, f)) for f in fields)
    elif kind < 0.9:
        msg = rng.choice(
            [
                "Initializing a V1 LLM engine (v0.8.5) with config",
                "vLLM API server version 0.10.2",
                "EngineCore encountered a fatal error.",
                "PoC generation started",
                "plain message",
                "Application startup complete.",
            ]
        )
    else:
        return rng.choice(
            [
                "",
                "   ",
                "\t\x1c",
                "Traceback (most recent call last):",
                '  File "x.py", line 1',
                "ValueError: boom",
                "INFO:     Started server process [1]",
                "not a record",
                "INFO:     Application startup complete.",
                "torch.OutOfMemoryError: CUDA out of memory",
            ]
        )
    if rng.random() < 0.05:
        msg += rng.choice(EXTRAS)
    return rng.choice(PREFIXES) + env + msg


RANDOM_LOGS = [
    pytest.param(0, 600, id="0-600-lines"),
    # 2000 lines of seeds 0 to 3 in the heavy tier; stands in the default tier: 600 lines of seed 0 of the same
    # sweep, tests/sources/logs/test_vllm_grammar.py::test_random_lines
    *(pytest.param(seed, 2000, marks=pytest.mark.heavy, id=f"{seed}-2000-lines") for seed in (0, 1, 2, 3)),
]


@pytest.mark.parametrize("seed,size", RANDOM_LOGS)
def test_random_lines(tmp_path, seed, size):
    rng = random.Random(seed)
    t = dt.datetime(2025, 12, 31, 23, 0, tzinfo=UTC)
    lines = []
    for _ in range(size):
        t += dt.timedelta(seconds=rng.choice([0, 0, 1, 10, 3600, 86400 * 40]))
        line = _random_line(rng, t)
        lines.append(line)
        if rng.random() < 0.05:
            lines.append(line)  # the same record twice: two records (two lines, two keys)
    path = tmp_path / "random.log"
    path.write_text("\n".join(lines) + "\n", encoding="ascii")
    _same_at_every_cut(path, chunks=(vllm_logs.CHUNK_BYTES, 4096))
    out = _same_at_every_cut(path, year=2025, chunks=(vllm_logs.CHUNK_BYTES, 2500))
    assert out["spec"].height > size // 20 and out["stats"].height > size // 20 and out["unparsed"].height > size // 200
    for frame in (out["spec"], out["stats"]):
        assert frame["line"].is_unique().all()


def test_a_non_ascii_chunk(tmp_path):
    path = tmp_path / "utf8.log"
    line = (
        "INFO 03-01 10:00:{:02d} [loggers.py:118] Avg prompt throughput: 1.0 tokens/s, "
        "Avg generation throughput: 2.0 tokens/s, Running: 3 reqs"
    )
    text = "\n".join(line.format(i) for i in range(40)) + "\nINFO 03-01 10:01:00 [x.py:1] modèle chargé\n"
    path.write_text(text + text, encoding="utf-8")
    out = _same_at_every_cut(path, year=2026, chunks=(len(text.encode()), 1 << 20, 1000))
    assert out["stats"].height == 80


def test_rollovers_and_versions_carry_across_chunks(tmp_path):
    """Each chunk is scanned on its own and then placed after the ones before it: the year rollover and the
    version lines on both sides of many chunk boundaries give the rows of one pass."""
    t = dt.datetime(2025, 12, 31, 23, 59, 0, tzinfo=UTC)
    lines = []
    for i in range(400):
        t += dt.timedelta(seconds=7)
        stamp = t.strftime("%m-%d %H:%M:%S")
        if i % 50 == 0:
            lines.append(f"INFO {stamp} [api_server.py:1] vLLM API server version 0.{9 + i // 100}.1")
        lines.append(
            f"INFO {stamp} [loggers.py:118] Avg prompt throughput: 1.0 tokens/s, Avg generation "
            f"throughput: 2.0 tokens/s, Running: {i % 5} reqs, Waiting: 0 reqs, GPU KV cache usage: 1.5%"
        )
        if i == 200:
            lines.append(f"INFO {stamp} [x.py:1] modèle chargé")
    path = tmp_path / "chain.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = _same_at_every_cut(path, year=2025, chunks=(1 << 20, 3000))
    _, st = _parse(LogFile(path, dt.datetime(2026, 3, 1, tzinfo=UTC)), 2025, 3000)
    assert st.rollovers == 1 and st.version == 12_000_001
    assert out["stats"].height == 400
    years = out["stats"]["at"].dt.year()
    assert years[0] == 2025 and years[-1] == 2026 and years.is_sorted()
    # from 0.11.1 a missing Preemptions field means 0; before, unknown
    pre = out["stats"]["preemptions"]  # versions 0.9.1, 0.10.1, 0.11.1, 0.12.1: a hundred rows each
    assert pre.head(200).null_count() == 200 and pre.tail(200).to_list() == [0] * 200


_ODD_LINE_ROWS: dict[str, tuple] = {}  # text -> its rows and counts, shared by the cases below (the clean texts recur)


# One offset in or at the edge of each part of the header ("INFO 03-01 10:00:01 [loggers.py:118] Avg"): before and
# after the level, between date and time, in the time, at the bracket, in the line number, in the message) in
# the default tier; every other offset of the first 40 in the heavy tier.
HEADER_OFFSETS = (0, 4, 10, 14, 20, 33, 39)
OFFSETS = [
    pytest.param(HEADER_OFFSETS, id="header-offsets"),
    # stands in the default tier: the header offsets,
    # tests/sources/logs/test_vllm_grammar.py::test_a_code_or_byte_anywhere_in_a_line
    pytest.param([p for p in range(40) if p not in HEADER_OFFSETS], marks=pytest.mark.heavy, id="the-other-offsets"),
]


@pytest.mark.parametrize("offsets", OFFSETS)
@pytest.mark.parametrize("odd", ["\x1b[1m", "\r", "é", "\x1b[0m\r"])
def test_a_code_or_byte_anywhere_in_a_line(tmp_path, odd, offsets):
    """An ANSI code anywhere in a line is stripped (the record reads as without it); a lone \r ends a line
    (as the text after it on a line of its own); a non-ASCII byte changes only its own line. At every
    offset of the line (one in each part of the header in the default tier), and in a last line without its
    newline."""
    line = (
        "INFO 03-01 10:00:01 [loggers.py:118] Avg prompt throughput: 1.0 tokens/s, "
        "Avg generation throughput: 2.0 tokens/s, Running: 3 reqs"
    )

    parsed = _ODD_LINE_ROWS  # the same text parses to the same rows: each distinct text parsed once

    def rows(text: str) -> tuple:
        if text not in parsed:
            path = tmp_path / "odd.log"
            path.write_bytes(text.encode("utf-8"))
            out, st = _parse(LogFile(path, dt.datetime(2026, 3, 2, tzinfo=UTC)), 2026, 1 << 20)
            parsed[text] = out["stats"].drop("line").to_dicts(), st.lines, st.records, st.unparsed
        return parsed[text]

    for pos in offsets:
        for last in (False, True):
            parts = (line + "\n" + line[:pos], line[pos:] + ("" if last else "\n" + line + "\n"))
            got = rows(odd.join(parts))
            clean = odd.replace("\x1b[1m", "").replace("\x1b[0m", "").replace("\r", "\n")
            if odd != "é":
                assert got == rows(clean.join(parts)), (pos, last)
            else:
                stats, lines, records, unparsed = got
                assert lines == 3 - last and len(stats) >= 2 - last and unparsed <= 1


def test_the_first_spec_marker_of_a_message_counts(tmp_path):
    """The fields are those after the first occurrence of the marker, wherever a second one lies."""
    lines = []
    for pad in (0, 5, 40, 120, 300):
        first, second = (
            "SpecDecoding metrics: Accepted: 7 tokens, Drafted: 9 tokens, ",
            "SpecDecoding metrics: Accepted: 1 tokens",
        )
        second += ", Drafted: 2 tokens".ljust(len(first) - len(second))
        lines.append(f"INFO 03-01 10:00:{pad % 60:02d} [metrics.py:1] {'x' * pad}{first}{second}{'y' * pad}")
    path = tmp_path / "twice.log"
    path.write_text("\n".join(lines) + "\n", encoding="ascii")
    out = _same_at_every_cut(path, year=2026)
    assert out["spec"]["accepted"].to_list() == [7] * 5 and out["spec"]["drafted"].to_list() == [9] * 5


def test_numbers_are_read_correctly_rounded(tmp_path):
    """Floats of every length (beyond 2^53, many digits after the point) read as Python's float() reads them."""
    numbers = [
        "9007199254740992",
        "9007199254740993",
        "0.9007199254740993",
        "900719925474099.3",
        "1234567890123456789",
        "12345678901234567890",
        "0." + "0" * 21 + "1",
        "0." + "0" * 22 + "1",
        "123.4567890123456789",
        "-0.0",
        "0" * 19 + "1.5",
        "1." + "9" * 22,
        "-9007199254740992.5",
    ]
    path = tmp_path / "numbers.log"
    path.write_text(
        "".join(
            f"INFO 03-01 10:00:{i:02d} [loggers.py:118] Avg prompt throughput: {x} tokens/s, Avg generation "
            f"throughput: 1.0 tokens/s, Running: 1 reqs, GPU KV cache usage: {x}%\n"
            for i, x in enumerate(numbers)
        ),
        encoding="ascii",
    )
    out = _same_at_every_cut(path, year=2026)
    assert out["stats"]["prompt_tps"].to_list() == [float(x) for x in numbers]


def test_stopping_early_or_a_failing_scan_leaves_no_thread_waiting(tmp_path, monkeypatch):
    """Chunks are scanned ahead in threads; a consumer that stops after the first batch, or a scan that
    fails, must still end the parse (nothing hangs)."""
    import threading

    line = (
        "INFO 03-01 10:00:{:02d} [loggers.py:118] Avg prompt throughput: 1.0 tokens/s, "
        "Avg generation throughput: 2.0 tokens/s, Running: 3 reqs"
    )
    text = "INFO 03-01 10:00:00 [x.py:1] modèle chargé\n" + "\n".join(line.format(i % 60) for i in range(300)) + "\n"
    path = tmp_path / "stop.log"
    path.write_text(text, encoding="utf-8")
    file = LogFile(path, dt.datetime(2026, 3, 2, tzinfo=UTC))
    outcome = {}

    def stop_early() -> None:
        batches = vllm_logs.iter_vllm_batches(file, 2026, None, 2000)
        outcome["first"] = next(batches).stats.height
        batches.close()

    def failing_scan() -> None:
        scan = vllm_logs._scan_chunk
        calls = []
        monkeypatch.setattr(
            vllm_logs,
            "_scan_chunk",
            lambda block: (
                scan(block) if calls.append(1) or len(calls) < 3 else (_ for _ in ()).throw(ValueError("scan failed"))
            ),
        )
        try:
            list(vllm_logs.iter_vllm_batches(file, 2026, None, 2000))
        except ValueError as exc:
            outcome["error"] = str(exc)

    for run in (stop_early, failing_scan):
        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        worker.join(60)
        assert not worker.is_alive(), f"{run.__name__} hung"
    assert outcome["first"] > 0 and outcome["error"] == "scan failed"


def test_identical_records_are_distinct_rows_by_line(tmp_path):
    """The same record printed twice is two records (two lines); rows carry the line their record starts on,
    whatever the chunk size and the process prefix."""
    heads = [
        f"INFO 03-01 10:00:{i % 3:02d} [loggers.py:118] Avg prompt throughput: 1.0 tokens/s, "
        f"Avg generation throughput: 2.0 tokens/s, Running: {i % 2} reqs"
        for i in range(60)
    ]
    prefixed = ["(EngineCore_DP0 pid=7) " + h if i % 4 == 0 else h for i, h in enumerate(heads)]
    path = tmp_path / "dups.log"
    path.write_text("\n".join(prefixed) + "\n", encoding="ascii")
    out = _same_at_every_cut(path, year=2026, chunks=(500, 1 << 20))
    assert out["stats"]["line"].to_list() == list(range(1, 61))
    assert out["stats"]["proc"].to_list() == ["EngineCore_DP0" if i % 4 == 0 else None for i in range(60)]


@pytest.mark.parametrize("gz", [False, True])
def test_blocks_hold_every_line_once(tmp_path, gz):
    """Blocks end at a line end, hold each byte once, and survive lines longer than a block (and gzip)."""
    import gzip

    lines = (
        b"".join(
            b"INFO 03-01 10:00:%02d [x.py:1] line %d%s\n" % (i % 60, i, b"x" * (9000 if i % 997 == 0 else 0))
            for i in range(5000)
        )
        + b"no final newline"
    )
    path = tmp_path / ("a.log.gz" if gz else "a.log")
    path.write_bytes(gzip.compress(lines) if gz else lines)
    blocks = [bytes(b) for b in vllm_logs._chunks(LogFile(path, dt.datetime(2026, 3, 2, tzinfo=UTC)), 4096)]
    assert b"".join(blocks) == lines
    assert all(b.endswith(b"\n") for b in blocks[:-1]) and len(blocks) > 40


def test_a_blocks_bytes_are_held_only_by_its_scan_until_split(tmp_path):
    """Neither the block reader nor the queue of scans keeps a block's bytes (32 MiB each) alive: the reader
    holds no reference once it has handed a block on, and the scan takes the block out of its box."""
    import sys

    path = tmp_path / "a.log"
    path.write_bytes(b"".join(b"INFO 03-01 10:00:%02d [x.py:1] line %d\n" % (i % 60, i) for i in range(3000)))
    blocks = vllm_logs._chunks(LogFile(path, dt.datetime(2026, 3, 2, tzinfo=UTC)), 4096)
    block = next(blocks)
    assert sys.getrefcount(block) == 2  # `block` and getrefcount's argument: the reader kept none
    box = [block]
    del block
    chunk = vllm_logs._scan_chunk(box)
    assert box == [] and chunk.lines > 0


def test_the_per_position_list_is_the_first_one_with_a_rate_wherever_it_stands(tmp_path):
    """The list is the first `Per-position acceptance rate: <rates>` of the message, found by a literal split:
    one without a rate after it is passed over for a later one, and the list ends where `, <rate>` stops."""
    head = "INFO 03-01 10:00:%02d [metrics.py:1] SpecDecoding metrics: "
    path = tmp_path / "pp.log"
    path.write_text(
        (head % 0)
        + "Per-position acceptance rate: n/a, Mean acceptance length: 1.75, Accepted: 3 tokens, Drafted: 4 tokens, "
        "Per-position acceptance rate: 0.500, 0.250\n"
        + (head % 10)
        + "Accepted: 3 tokens, Drafted: 4 tokens, Per-position acceptance rate: 0.500,0.250, "
        "Avg Draft acceptance rate: 75.0%\n"
        + (head % 20)
        + "Per-position acceptance rate: 0.600, 0.150, Accepted: 3 tokens, Drafted: 4 tokens\n"
        + (head % 30)
        + "Accepted: 3 tokens, Drafted: 4 tokens, Per-position acceptance rate: \n",
        encoding="ascii",
    )
    out, _ = _parse(LogFile(path, dt.datetime(2026, 3, 2, tzinfo=UTC)), 2026, 1 << 20)
    spec = out["spec"].sort("line")
    assert spec["per_position"].to_list() == [[0.5, 0.25], [0.5], [0.6, 0.15], None]
    assert spec["accepted"].to_list() == [3] * 4 and spec["drafted"].to_list() == [4] * 4
    assert spec["mal_printed"].to_list() == [1.75, None, None, None]
    assert spec["acceptance_rate_printed"].to_list() == [None, 75.0, None, None]


def test_an_impossible_stamp_is_an_unparsed_line_not_an_error(tmp_path):
    """Month 13 or hour 25 cannot be dated: the line is not a record, and the parse goes on."""
    path = tmp_path / "bad-stamp.log"
    path.write_text(
        "INFO 03-01 10:00:00 [x.py:1] Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: "
        "2.0 tokens/s, Running: 3 reqs\n"
        "INFO 13-01 10:00:10 [x.py:1] Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: "
        "2.0 tokens/s, Running: 4 reqs\n"
        "INFO 03-01 25:00:20 [x.py:1] plain\n",
        encoding="ascii",
    )
    out, st = _parse(LogFile(path, dt.datetime(2026, 3, 2, tzinfo=UTC)), 2026, 1 << 20)
    assert out["stats"]["running"].to_list() == [3]
    assert out["unparsed"]["line"].to_list() == [2, 3]
    assert (st.lines, st.records, st.unparsed) == (3, 1, 2)


def test_v1_tracebacks_with_the_header_on_every_line_are_one_record(tmp_path):
    """vLLM V1 prints each line of a traceback with the full header (and `\r\n` line ends): the lines after
    the first are folded into the record, so an engine core that dies of an OOM is one fatal record with
    its oom event on the same line, the API server's output-handler failure under another pid is its own
    engine_dead record, and a startup failure's cause is its exception line (real lines: the source note
    beside the data file). The same at every chunk cut, including inside the tracebacks."""
    from pathlib import Path

    from pipeline.ingest.logs import ingest_logs
    from pipeline.warehouse.database import fetch_frame, open_for_write

    path = Path(__file__).parents[2] / "data" / "vllm_v1_header_traceback.log"
    out = _same_at_every_cut(path, year=2025, chunks=(1 << 20, 300, 64))
    events = out["events"].select("line", "kind", "proc", "detail").rows()
    assert [(line, kind, proc) for line, kind, proc, _ in events] == [
        (2, "fatal", "EngineCore"),
        (2, "oom", "EngineCore"),
        (9, "engine_dead", "APIServer"),
        (14, "fatal", "EngineCore_DP0"),
    ]
    assert events[0][3].startswith(
        "EngineCore encountered a fatal error. — torch.OutOfMemoryError: CUDA out of memory."
    )
    assert events[3][3].startswith("EngineCore failed to start. — ValueError: Free memory on device (3.22/4.0 GiB)")
    assert out["stats"].height == 1 and out["unparsed"].height == 0
    con = open_for_write(tmp_path / "v1.duckdb")
    ingest_logs(con, [path], host=sample_address("vhe4dr"), kind="vllm", year=2025)
    keys = fetch_frame(con, "SELECT kind, record_key FROM engine_events WHERE line = 2 ORDER BY kind")
    assert keys["kind"].to_list() == ["fatal", "oom"] and keys["record_key"].n_unique() == 1
    con.close()


def test_a_collector_prefix_learned_from_records_reads_alike_at_every_cut(tmp_path):
    """Lines without an envelope under the prefix the records carry (a logging wrapper's) are read without it
    once a record before them had it: the same rows at every chunk size, no line quarantined, each traceback's
    death found. A line under the prefix before any record that had it stays unparsed."""
    pre = "2025-06-27 12:57:{s:02d},{ms:03d} - __main__ - INFO - "
    lines = [pre.format(s=0, ms=0) + '  File "/x.py", line 1, in f']  # before any record: unparsed
    for i in range(300):
        s, ms = i % 60, i
        lines.append(pre.format(s=s, ms=ms) + f"INFO 06-27 12:57:{s:02d} [core.py:{i}] step {i}")
        if i % 50 == 7:
            lines += [
                pre.format(s=s, ms=ms) + "Traceback (most recent call last):",
                pre.format(s=s, ms=ms) + '  File "/v/utils.py", line 494, in wait_for_engine_startup',
                pre.format(s=s, ms=ms) + "RuntimeError: Engine core initialization failed. See root cause above.",
            ]
    path = tmp_path / "wrapped.log"
    path.write_text("\n".join(lines) + "\n")
    out = _same_at_every_cut(path, year=2025, chunks=(vllm_logs.CHUNK_BYTES, 700, 3000))
    assert out["unparsed"]["line"].to_list() == [1]
    events = out["events"].filter(pl.col("kind") == "engine_dead")
    assert events.height == 6
    assert events["detail"].str.contains("Engine core initialization failed").all()
