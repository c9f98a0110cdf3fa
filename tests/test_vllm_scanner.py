"""The C scanner of vLLM logs (pipeline/native/vllmscan.c) against the Polars path it accelerates.

Both paths must give the same rows, keys, counts and stream state on every input: generated logs of
every supported vLLM version, the edge-case log of test_logs, and seeded random mutations of real
line shapes (numbers of every form, ANSI codes, process and free-text prefixes, impossible stamps,
event words inside records, duplicate lines, chunk boundaries everywhere).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import random

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from pipeline.sources import vllm_logs
from pipeline.sources.logfiles import LogFile

UTC = dt.timezone.utc
native = vllm_logs._native


def test_scanner_is_built():
    """The extension is optional at install time; on this project's machines it must have been built."""
    if os.environ.get("GONKA_EVIDENCE_NATIVE_LOGS") == "0":
        pytest.skip("C scanner switched off")
    assert native is not None, "pipeline._vllmscan did not build (is a C compiler installed?)"


needs_native = pytest.mark.skipif(native is None, reason="C scanner not built")


def _parse(file: LogFile, year, chunk_bytes: int, scanner) -> tuple[dict, vllm_logs.VllmStream]:
    saved = vllm_logs._native
    vllm_logs._native = scanner
    try:
        st = vllm_logs.VllmStream(year)
        out: dict[str, list] = {k: [] for k in ("spec", "stats", "events", "unparsed")}
        for batch in vllm_logs.iter_vllm_batches(file, year, st, chunk_bytes):
            for name in out:
                frame = getattr(batch, name)
                if frame.width:
                    out[name].append(frame)
        return {k: pl.concat(v) if v else None for k, v in out.items()}, st
    finally:
        vllm_logs._native = saved


def _same(path, year=None, chunk_bytes=vllm_logs.CHUNK_BYTES, mtime=dt.datetime(2026, 3, 1, tzinfo=UTC)) -> dict:
    file = LogFile(path, mtime)
    fast, st_fast = _parse(file, year, chunk_bytes, native)
    slow, st_slow = _parse(file, year, chunk_bytes, None)
    for name in fast:
        assert (fast[name] is None) == (slow[name] is None), name
        if fast[name] is not None:
            assert_frame_equal(fast[name], slow[name].select(fast[name].columns), check_exact=True)
    for attr in ("lines", "records", "unparsed", "rollovers", "last_month", "version", "first", "last", "base"):
        assert getattr(st_fast, attr) == getattr(st_slow, attr), attr
    return fast


@needs_native
def test_generated_logs_of_every_version(tmp_path):
    from pipeline.samples.logs import write_log_samples

    write_log_samples(tmp_path, seed=11)
    files = sorted(p for p in tmp_path.rglob("*") if p.is_file() and "vllm" in p.name)
    assert files, "the sample generator wrote no vLLM logs"
    rows = 0
    for path in files:
        for chunk in (vllm_logs.CHUNK_BYTES, 3000):
            out = _same(path, chunk_bytes=chunk)
            rows += sum(f.height for f in out.values() if f is not None)
    assert rows > 1000


@needs_native
def test_edge_log(tmp_path):
    from tests.test_logs import EDGE_LOG

    path = tmp_path / "edge.log"
    path.write_bytes(EDGE_LOG * 3 + b"INFO 01-02 00:00:00 [x.py:1] PoC stopped: 1 nonces")
    for chunk in (64, 1000, 1 << 20):
        _same(path, chunk_bytes=chunk, mtime=dt.datetime(2027, 1, 2, tzinfo=UTC))


NUMBERS = ["0", "7", "12.5", "-3.25", "nan", "00012", "3.", ".5", "1e5", "-", "123456789012345678",
           "1234567890123456789", "0.1000000000000000055511151231257827", "9" * 30 + ".5", "nanx", "12.5.3"]
SPEC_FIELDS = ["Mean acceptance length: {}", "Accepted throughput: {} tokens/s", "Drafted throughput: {} tokens/s",
               "Accepted: {} tokens", "Drafted: {} tokens", "Draft acceptance rate: {}%",
               "Avg Draft acceptance rate: {}%", "Per-position acceptance rate: {}", "Unknown: {}"]
STATS_FIELDS = ["Running: {} reqs", "Waiting: {} reqs", "Pending: {} reqs", "Swapped: {} reqs", "Preemptions: {}",
                "GPU KV cache usage: {}%", "Prefix cache hit rate: {}%", "CPU KV cache usage: {}%"]
HEADS = ["", "Engine 000: ", "Engine 12: ", "2 Engines Aggregated: ", "Engine x: ", "Engine 001 "]
PREFIXES = ["", "(EngineCore_DP0 pid=2834) ", "\x1b[36m(EngineCore_DP0 pid=2834)\x1b[0m ", "(APIServer pid=1)",
            "(Bad pid=x) ", "[rank0]: ", "my-host | "]
LEVELS = ["INFO", "DEBUG", "WARNING", "ERROR", "CRITICAL", "\x1b[32mINFO\x1b[0m", "TRACE"]
EXTRAS = ["", " died unexpectedly", " version 1.2.3", ", LLM engine (v0.9.1)", " EngineDeadError", "\x1b[1m",
          " CUDA out of memory", ", Engine 000: x"]


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
        stamp = rng.choice(["13-01 00:00:00", "02-30 10:00:00", "04-31 23:59:59", "01-01 24:00:00", "01-01 10:60:00",
                            "00-10 10:00:00", "1-01 10:00:00"])
    if rng.random() < 0.1:
        stamp += rng.choice([".123", ",5", ".", ""])
    env = f"{rng.choice(LEVELS)} {stamp} [{rng.choice(['loggers.py:118', 'metrics.py:86', 'a]b.py:1', ''])}] "
    if rng.random() < 0.02:
        env = env.replace("] ", "]")
    if kind < 0.4:
        fields = rng.sample(SPEC_FIELDS, rng.randint(0, len(SPEC_FIELDS)))
        if rng.random() < 0.8:  # mostly records that parse
            fields = ["Accepted: {} tokens", "Drafted: {} tokens"] + [f for f in fields if not f.startswith(("Acc", "Dra"))]
        parts = []
        for f in fields:
            if f.startswith("Per-position"):
                parts.append(f.format(", ".join(_number(rng) for _ in range(rng.randint(1, 6)))))
            else:
                parts.append(f.format(_number(rng, f)))
        msg = "SpecDecoding metrics:" + rng.choice([" ", "", "  ", "\t", " \x1c"]) + ", ".join(parts)
    elif kind < 0.8:
        msg = (rng.choice(HEADS) + f"Avg prompt throughput: {_number(rng)} tokens/s, "
               f"Avg generation throughput: {_number(rng)} tokens/s")
        fields = rng.sample(STATS_FIELDS, rng.randint(0, len(STATS_FIELDS)))
        if rng.random() < 0.8:
            fields = ["Running: {} reqs"] + [f for f in fields if not f.startswith("Running")]
        msg += "".join(", " + f.format(_number(rng, f)) for f in fields)
    elif kind < 0.9:
        msg = rng.choice(["Initializing a V1 LLM engine (v0.8.5) with config", "vLLM API server version 0.10.2",
                          "EngineCore encountered a fatal error.", "PoC generation started", "plain message",
                          "Application startup complete."])
    else:
        return rng.choice(["", "   ", "\t\x1c", "Traceback (most recent call last):", "  File \"x.py\", line 1",
                           "ValueError: boom", "INFO:     Started server process [1]", "not a record",
                           "INFO:     Application startup complete.", "torch.OutOfMemoryError: CUDA out of memory"])
    if rng.random() < 0.05:
        msg += rng.choice(EXTRAS)
    return rng.choice(PREFIXES) + env + msg


@needs_native
@pytest.mark.parametrize("seed", range(4))
def test_random_lines(tmp_path, seed):
    rng = random.Random(seed)
    t = dt.datetime(2025, 12, 31, 23, 0, tzinfo=UTC)
    lines = []
    for _ in range(2000):
        t += dt.timedelta(seconds=rng.choice([0, 0, 1, 10, 3600, 86400 * 40]))
        line = _random_line(rng, t)
        lines.append(line)
        if rng.random() < 0.05:
            lines.append(line)  # the same record twice: occurrence numbers in the keys
    path = tmp_path / "random.log"
    path.write_text("\n".join(lines) + "\n", encoding="ascii")
    for year, chunk in ((None, vllm_logs.CHUNK_BYTES), (2025, 4096), (2025, 2500)):
        out = _same(path, year=year, chunk_bytes=chunk)
    assert out["spec"].height > 100 and out["stats"].height > 100 and out["unparsed"].height > 10


@needs_native
def test_a_non_ascii_chunk_takes_the_polars_path(tmp_path):
    path = tmp_path / "utf8.log"
    line = "INFO 03-01 10:00:{:02d} [loggers.py:118] Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 3 reqs"
    text = "\n".join(line.format(i) for i in range(40)) + "\nINFO 03-01 10:01:00 [x.py:1] modèle chargé\n"
    path.write_text(text + text, encoding="utf-8")
    out = _same(path, year=2026, chunk_bytes=len(text.encode()))
    assert out["stats"].height == 80


@needs_native
def test_chunks_are_placed_in_the_scanning_threads_also_after_a_polars_chunk(tmp_path, monkeypatch):
    """Each chunk is numbered, dated and given its version in its scanning thread, from the placement of
    the chunk before it; after a chunk of the Polars path (here non-ASCII) the walk hands the placement
    on, and the chunks after it are still assembled in their threads. The rows and state are those of
    the Polars path (a year rollover and version lines on both sides of that chunk)."""
    import threading

    t = dt.datetime(2025, 12, 31, 23, 59, 0, tzinfo=UTC)
    lines = []
    for i in range(400):
        t += dt.timedelta(seconds=7)
        stamp = t.strftime("%m-%d %H:%M:%S")
        if i % 50 == 0:
            lines.append(f"INFO {stamp} [api_server.py:1] vLLM API server version 0.{9 + i // 100}.1")
        lines.append(f"INFO {stamp} [loggers.py:118] Avg prompt throughput: 1.0 tokens/s, Avg generation "
                     f"throughput: 2.0 tokens/s, Running: {i % 5} reqs, Waiting: 0 reqs, GPU KV cache usage: 1.5%")
        if i == 200:
            lines.append(f"INFO {stamp} [x.py:1] modèle chargé")
    path = tmp_path / "chain.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    file = LogFile(path, dt.datetime(2026, 3, 1, tzinfo=UTC))
    assembled, polars_chunks = [], []
    native_chunk, polars_chunk = vllm_logs._native_chunk, vllm_logs._polars_chunk
    monkeypatch.setattr(vllm_logs, "_native_chunk", lambda *a: assembled.append(threading.current_thread().name)
                        or native_chunk(*a))
    monkeypatch.setattr(vllm_logs, "_polars_chunk", lambda *a: polars_chunks.append(1) or polars_chunk(*a))
    _, st = _parse(file, 2025, 3000, native)
    assert len(polars_chunks) == 1 and len(assembled) > 10
    assert all(name.startswith("vllm-scan") for name in assembled)
    assert st.rollovers == 1 and st.version == 12_000_001
    out = _same(path, year=2025, chunk_bytes=3000)
    assert out["stats"].height == 400


@needs_native
@pytest.mark.parametrize("odd", ["\x1b[1m", "\r", "é", "\x1b[0m\r"])
def test_a_code_or_byte_anywhere_in_a_line(tmp_path, odd):
    """The scanner reads a line 16 bytes at a time, noting ANSI codes (stripped) and \r or non-ASCII bytes
    (the chunk goes to the Polars path): at every offset of the first blocks, and in a last line without
    its newline, the rows are the Polars path's."""
    line = "INFO 03-01 10:00:01 [loggers.py:118] Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 3 reqs"
    for pos in range(40):
        for last in (False, True):
            text = line + "\n" + line[:pos] + odd + line[pos:] + ("" if last else "\n" + line + "\n")
            path = tmp_path / f"odd-{pos}-{last}.log"
            path.write_bytes(text.encode("utf-8"))
            _same(path, year=2026, chunk_bytes=1 << 20)


@needs_native
def test_the_first_spec_marker_of_a_message_counts(tmp_path):
    """The marker is searched from both halves of a message at once; the fields are those after its first
    occurrence wherever the second one lies (as `str.splitn(..., 2)` of the Polars path)."""
    lines = []
    for pad in (0, 5, 40, 120, 300):  # the second marker starts at the middle of the message
        first, second = "SpecDecoding metrics: Accepted: 7 tokens, Drafted: 9 tokens, ", "SpecDecoding metrics: Accepted: 1 tokens"
        second += ", Drafted: 2 tokens".ljust(len(first) - len(second))
        lines.append(f"INFO 03-01 10:00:{pad % 60:02d} [metrics.py:1] {'x' * pad}{first}{second}{'y' * pad}")
    path = tmp_path / "twice.log"
    path.write_text("\n".join(lines) + "\n", encoding="ascii")
    out = _same(path, year=2026)
    assert out["spec"]["accepted"].to_list() == [7] * 5 and out["spec"]["drafted"].to_list() == [9] * 5


@needs_native
def test_numbers_at_the_edges_of_the_fast_float_path(tmp_path):
    """Floats are read with one division when the digits make a mantissa of at most 2^53 and at most 22
    follow the point, else with strtod: both correctly rounded, the Polars cast's value on each side."""
    numbers = ["9007199254740992", "9007199254740993", "0.9007199254740993", "900719925474099.3", "1234567890123456789",
               "12345678901234567890", "0." + "0" * 21 + "1", "0." + "0" * 22 + "1", "123.4567890123456789", "-0.0",
               "0" * 19 + "1.5", "1." + "9" * 22, "-9007199254740992.5"]
    path = tmp_path / "numbers.log"
    path.write_text("".join(f"INFO 03-01 10:00:{i:02d} [loggers.py:118] Avg prompt throughput: {x} tokens/s, Avg generation "
                            f"throughput: 1.0 tokens/s, Running: 1 reqs, GPU KV cache usage: {x}%\n"
                            for i, x in enumerate(numbers)), encoding="ascii")
    out = _same(path, year=2026)
    assert out["stats"]["prompt_tps"].to_list() == [float(x) for x in numbers]


@needs_native
def test_stopping_at_a_polars_chunk_leaves_no_thread_waiting(tmp_path, monkeypatch):
    """The threads of the chunks after a Polars-path chunk wait for its walk; a consumer that stops there,
    or a walk that fails there, must still end the parse (the waits are cancelled, nothing hangs)."""
    import threading

    line = "INFO 03-01 10:00:{:02d} [loggers.py:118] Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 3 reqs"
    text = "INFO 03-01 10:00:00 [x.py:1] modèle chargé\n" + "\n".join(line.format(i % 60) for i in range(300)) + "\n"
    path = tmp_path / "stop.log"
    path.write_text(text, encoding="utf-8")  # the first chunk is the Polars path's
    file = LogFile(path, dt.datetime(2026, 3, 2, tzinfo=UTC))
    outcome = {}

    def stop_early() -> None:
        batches = vllm_logs.iter_vllm_batches(file, 2026, None, 2000)
        outcome["first"] = next(batches).stats.height
        batches.close()

    def failing_walk() -> None:
        monkeypatch.setattr(vllm_logs, "_polars_chunk", lambda *a: (_ for _ in ()).throw(ValueError("walk failed")))
        try:
            list(vllm_logs.iter_vllm_batches(file, 2026, None, 2000))
        except ValueError as exc:
            outcome["error"] = str(exc)

    for run in (stop_early, failing_walk):
        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        worker.join(60)
        assert not worker.is_alive(), f"{run.__name__} hung"
    assert outcome == {"first": 14, "error": "walk failed"}


def _expected_keys(heads: list[str]) -> list[str]:
    seen: dict[bytes, int] = {}
    keys = []
    for head in heads:
        digest = hashlib.blake2b(head.encode(), digest_size=10).digest()
        n = seen.get(digest[:8], 0)
        seen[digest[:8]] = n + 1
        keys.append(f"{digest.hex()}:{n}")
    return keys


@pytest.mark.parametrize("scanner", [pytest.param(native, marks=needs_native, id="c"), pytest.param(None, id="polars")])
def test_record_keys_are_the_hash_of_the_head_and_its_occurrence(tmp_path, scanner):
    """Identical records (and records sharing a head) get :0, :1, … in file order, across chunks."""
    heads = [f"INFO 03-01 10:00:{i % 3:02d} [loggers.py:118] Avg prompt throughput: 1.0 tokens/s, "
             f"Avg generation throughput: 2.0 tokens/s, Running: {i % 2} reqs" for i in range(60)]
    prefixed = ["(EngineCore_DP0 pid=7) " + h if i % 4 == 0 else h for i, h in enumerate(heads)]
    path = tmp_path / "dups.log"
    path.write_text("\n".join(prefixed) + "\n", encoding="ascii")
    out, _ = _parse(LogFile(path, dt.datetime(2026, 3, 2, tzinfo=UTC)), 2026, 500, scanner)
    assert out["stats"]["record_key"].to_list() == _expected_keys(heads)


@needs_native
def test_blake2b_matches_hashlib():
    rng = random.Random(3)
    for n in [0, 1, 63, 127, 128, 129, 255, 256, 257, 1000, 4096]:
        data = bytes(rng.randrange(256) for _ in range(n))
        assert native.blake2b10(data) == hashlib.blake2b(data, digest_size=10).digest()


@needs_native
@pytest.mark.parametrize("kernel", ["avx512", "avx2", "scalar"])
def test_every_hash_kernel_matches_hashlib(kernel):
    """The lane kernels hash up to 8 lines at once, queued by block count (lines of 1-4 blocks; longer ones
    at once): every length around the block edges, queues flushed part full, the same digests as hashlib."""
    saved = native.hash_kernel()
    try:
        native.hash_kernel(kernel)
    except ValueError:
        pytest.skip(f"this CPU has no {kernel}")
    try:
        rng = random.Random(8)
        lengths = [n for edge in (0, 128, 256, 384, 512, 640) for n in range(max(edge - 2, 0), edge + 3)]
        items = [bytes(rng.randrange(256) for _ in range(n)) for n in lengths + [rng.randrange(700) for _ in range(500)]]
        for count in (1, 7, 8, 9, len(items)):  # part-full and full queues
            expected = b"".join(hashlib.blake2b(x, digest_size=10).digest() for x in items[:count])
            assert native.blake2b10_many(items[:count]) == expected
    finally:
        native.hash_kernel(saved)


@needs_native
def test_key_state_matches_the_numpy_fallback():
    rng = np.random.default_rng(5)
    c_keys, np_keys = native.KeyState(), vllm_logs._NumpyKeys()
    pool = rng.integers(0, 256, size=(50, 10), dtype=np.uint8)
    pool[0, :8] = 0  # the hash prefix 0 is the C table's empty marker
    for size in (1, 17, 500, 3000):
        digests = np.ascontiguousarray(pool[rng.integers(0, 50, size)]).tobytes()
        assert vllm_logs._key_series(c_keys.assign(digests)).to_list() == \
            vllm_logs._key_series(np_keys.assign(digests)).to_list()


@pytest.mark.parametrize("gz", [False, True])
def test_blocks_hold_every_line_once(tmp_path, gz):
    """Blocks end at a line end, hold each byte once, and survive lines longer than a block (and gzip's
    short reads)."""
    import gzip

    lines = b"".join(b"INFO 03-01 10:00:%02d [x.py:1] line %d%s\n" % (i % 60, i, b"x" * (9000 if i % 997 == 0 else 0))
                     for i in range(5000)) + b"no final newline"
    path = tmp_path / ("a.log.gz" if gz else "a.log")
    path.write_bytes(gzip.compress(lines) if gz else lines)
    spare: list = []  # buffers given back are reused, as the parser does
    blocks = []
    for block in vllm_logs._chunks(LogFile(path, dt.datetime(2026, 3, 2, tzinfo=UTC)), 4096, spare):
        blocks.append(bytes(block))
        spare.append(block.obj)
    assert b"".join(blocks) == lines
    assert all(b.endswith(b"\n") for b in blocks[:-1]) and len(blocks) > 40


@pytest.mark.parametrize("scanner", [pytest.param(native, marks=needs_native, id="c"), pytest.param(None, id="polars")])
def test_an_impossible_stamp_is_an_unparsed_line_not_an_error(tmp_path, scanner):
    """Month 13 or hour 25 cannot be dated: the line is not a record (it used to stop the whole parse)."""
    path = tmp_path / "bad-stamp.log"
    path.write_text("INFO 03-01 10:00:00 [x.py:1] Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: "
                    "2.0 tokens/s, Running: 3 reqs\n"
                    "INFO 13-01 10:00:10 [x.py:1] Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: "
                    "2.0 tokens/s, Running: 4 reqs\n"
                    "INFO 03-01 25:00:20 [x.py:1] plain\n", encoding="ascii")
    out, st = _parse(LogFile(path, dt.datetime(2026, 3, 2, tzinfo=UTC)), 2026, 1 << 20, scanner)
    assert out["stats"]["running"].to_list() == [3]
    assert out["unparsed"]["line"].to_list() == [2, 3]
    assert (st.lines, st.records, st.unparsed) == (3, 1, 2)
