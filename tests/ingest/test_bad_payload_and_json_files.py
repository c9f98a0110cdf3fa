"""Hardening of the payload and saved-JSON inputs: what is not a usable file or document ends in a
counted quarantine or a one-line error, never a hang, an unbounded read or a traceback.

- Payload files that are FIFOs, symlinks to devices, directories, dangling symlinks or larger than
  the cap are quarantined with the reason; the ingest finishes (run as a subprocess with a timeout,
  so a hang fails the test instead of stopping the suite).
- `ingest-json` with huge integers, huge exponents, deep nesting and broken gzip: quarantined with
  the reason, or a one-line `error:` and exit 1; a hypothesis fuzz over such inputs (regular files: the
  command in-process; a FIFO or /dev/zero: a subprocess with a timeout).
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pipeline.cli.app import app
from pipeline.sources.store.payloads import MAX_PAYLOAD_FILE_BYTES
from pipeline.warehouse.database import fetch_frame, open_for_write
from tests.helpers import cli_in

runner = CliRunner()


def _cli(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    entry_point = Path(sys.executable).with_name("gonka-evidence")  # this venv's console script
    return subprocess.run([str(entry_point), *args], capture_output=True, text=True, timeout=timeout)


def _frames(warehouse: Path, *queries: str) -> list:
    con = open_for_write(warehouse)
    try:
        return [fetch_frame(con, sql) for sql in queries]
    finally:
        con.close()


def _in(*args: str):
    """`gonka-evidence ARGS` in-process, for inputs that are regular files (nothing a read could block on): the same
    exit code and stderr as its process (an exception the CLI did not turn into an exit is raised here)."""
    return cli_in(Path.cwd(), *args)


def _no_traceback(proc) -> None:
    assert "Traceback" not in proc.stderr and "Aborted" not in proc.stderr, proc.stderr


# -- payload files ------------------------------------------------------------------------------------


# inference id -> words of its reason: each payload file that is not a regular file, or is too large.
SPECIAL_PAYLOAD_FILES = {
    900001: "a FIFO",
    900002: "a character device",
    900003: "a directory",
    900004: "a character device",
    900005: "No such file or directory",
    900006: "larger than",
}


def _plant_special_payload_files(escrow_dir: Path, tmp_path: Path) -> None:
    os.mkfifo(escrow_dir / "900001.json")
    (escrow_dir / "900002.json").symlink_to("/dev/zero")
    (escrow_dir / "900003.json").mkdir()
    (escrow_dir / "900004.json").symlink_to("/dev/null")
    (escrow_dir / "900005.json").symlink_to(tmp_path / "nowhere.json")
    with open(escrow_dir / "900006.json", "wb") as f:  # sparse: no disk space, never read
        f.truncate(MAX_PAYLOAD_FILE_BYTES + 1)


def test_special_payload_files_are_listed_and_read_as_their_problem(tmp_path):
    """The payload plane's listing and reading, without an ingest: each special file is listed (not a stray,
    not skipped) and read back as a problem naming what it is, in a thread with a deadline (a FIFO or
    /dev/zero that were opened and read would hang or never end)."""
    import threading

    from pipeline.sources.store.payloads import payload_files, read_payload_file

    root = tmp_path / "payloads"
    escrow_dir = root / "4" / "4100"
    escrow_dir.mkdir(parents=True)
    _plant_special_payload_files(escrow_dir, tmp_path)
    (escrow_dir / "7.json").write_bytes(b'{"prompt_payload":"YWJj"}')
    got: dict[int, object] = {}

    def read_all() -> None:
        for f in payload_files(root, set()):
            got[f.inference_id] = read_payload_file(f)

    reader = threading.Thread(target=read_all, daemon=True)
    reader.start()
    reader.join(timeout=60)
    assert not reader.is_alive(), "a special payload file was read as a stream"
    assert sorted(got) == [7, *SPECIAL_PAYLOAD_FILES]
    assert got[7].problem is None and got[7].prompt == b"abc"
    for inference, why in SPECIAL_PAYLOAD_FILES.items():
        problem = got[inference].problem
        assert problem.startswith("payload file ") and why in problem, problem
    assert got[900006].problem == (
        f"payload file larger than {MAX_PAYLOAD_FILE_BYTES:,} bytes ({MAX_PAYLOAD_FILE_BYTES + 1:,})"
    )


# A CLI process (with a timeout) ingesting a whole sample copy; stands in the default tier: each file listed and read
# as its problem,
# tests/ingest/test_bad_payload_and_json_files.py::test_special_payload_files_are_listed_and_read_as_their_problem,
# and a payload file's problem quarantined by the ingest and counted,
# tests/ingest/test_input_classes.py::test_a_payload_beyond_the_size_limit_is_quarantined_from_its_size_without_reading_it # noqa: E501
@pytest.mark.heavy
def test_payload_files_that_are_not_regular_files_are_quarantined(tmp_path, timeline):
    copy = timeline.copy(last_epoch=4)
    store = copy.write_sqlite(tmp_path / "store")
    escrow_dir = next(p for p in sorted((store / "payloads").glob("*/*")) if p.is_dir())
    specials = SPECIAL_PAYLOAD_FILES
    _plant_special_payload_files(escrow_dir, tmp_path)
    warehouse = tmp_path / "warehouse.duckdb"

    proc = _cli("ingest", str(store), "--warehouse", str(warehouse), timeout=900)
    _no_traceback(proc)
    assert proc.returncode == 0, proc.stderr

    q, checks = _frames(
        warehouse,
        "SELECT row_key, reason FROM quarantine WHERE table_name = 'payload_storage'",
        "SELECT inference_id, complete FROM answer_checks_t WHERE inference_id >= 900001",
    )
    reasons = {int(k.rsplit("/", 1)[1]): r for k, r in q.iter_rows()}
    for inference, why in specials.items():
        assert why in reasons[inference] and reasons[inference].startswith("payload file "), reasons[inference]
    assert reasons[900006] == (
        f"payload file larger than {MAX_PAYLOAD_FILE_BYTES:,} bytes ({MAX_PAYLOAD_FILE_BYTES + 1:,})"
    )
    assert q.height == len(specials)  # the six files, nothing else
    assert checks.height == len(specials) and not any(checks["complete"])  # counted: a row each, incomplete


def test_payload_file_reasons(tmp_path):
    from pipeline.sources.store.payloads import PayloadFile, read_payload_file

    cases = {
        "not_json": b"{",
        "not_object": b"[1]",
        "bad_base64": b'{"prompt_payload":"!!!!","response_payload":null}',
        "unpadded": b'{"prompt_payload":"YWJj","response_payload":"YQ"}',
        "ok": b'{"prompt_payload":"YWJj"}',
    }
    got = {}
    for k, (name, data) in enumerate(cases.items()):
        (tmp_path / f"{k}.json").write_bytes(data)
        got[name] = read_payload_file(PayloadFile(1, "e", k, tmp_path / f"{k}.json"))
    for name in ("not_json", "not_object", "bad_base64", "unpadded"):
        assert got[name].problem.startswith("payload file is not a base64 JSON object ("), got[name]
    assert got["ok"].problem is None and got["ok"].prompt == b"abc" and got["ok"].response is None


# -- ingest-json ----------------------------------------------------------------------------------------

RECORD = {"epoch_index": 5, "participant": "gonka1x", "model": "m", "assigned_nonces": 3, "counters": []}


def _gz_variants() -> dict[str, bytes]:
    def gz(name: str) -> bytes:  # a participant of its own per file: each file's record stays
        return gzip.compress(json.dumps([RECORD | {"participant": name}]).encode())

    bad_crc, corrupt = bytearray(gz("badcrc")), bytearray(gz("corrupt"))
    bad_crc[-8] ^= 0xFF
    corrupt[len(corrupt) // 2] ^= 0xFF
    return {
        "ok.json.gz": gz("ok"),
        "badcrc.json.gz": bytes(bad_crc),
        "corrupt.json.gz": bytes(corrupt),
        "truncated.json.gz": gz("truncated")[:40],
        "padded.json.gz": gz("padded") + b"\0" * 10,
        "two-members.json.gz": gzip.compress(b"[")
        + gzip.compress(json.dumps(RECORD | {"participant": "two"}).encode() + b"]"),
    }


QUARANTINED = {  # file → the reason its quarantine row must start with
    "hugeint.json": (
        '{"epoch_index":5,"participant":"gonka1x","counters":[],"assigned_nonces":%s}' % ("9" * 5000),
        "a number out of range (Integer value out of range",
    ),
    "hugeint-epoch.json": (
        '{"epoch_index":%s,"participant":"gonka1x","counters":[],"assigned_nonces":1}' % ("9" * 30),
        "epoch_index 99999999999999999999 is beyond 64 bits",
    ),
    "hugeint-count.json": (
        '{"epoch_index":5,"participant":"gonka1x","counters":[{"escrow_id":"1","slot_id":"0",'
        f'"disposition":"miss","count":{2**64}}}]}}',
        "count 18446744073709551616 is beyond 64 bits",
    ),
    "hugeexp.json": (
        '{"epoch_index":5,"participant":"gonka1x","counters":[],"assigned_nonces":1e999999}',
        "a number out of range (Number out of range",
    ),
    "hugeint-string.json": (
        '{"epoch_index":5,"participant":"gonka1x","counters":[],"assigned_nonces":"%s"}' % ("9" * 5000),
        "assigned_nonces 99999999999999999999… is beyond 64 bits",
    ),
    "hugeexp-decimal.json": (
        '[{"participant_id":"p","inference_count":"1","epoch_index":5,"invalidLLR":{"value":"1","exponent":"999999"}}]',
        "invalidLLR {'value': '1'",
    ),
    "hugeexp-exponent.json": (
        '[{"participant_id":"p","inference_count":"1","epoch_index":5,'
        '"invalidLLR":{"value":"1","exponent":"%s"}}]' % ("9" * 40),
        "invalidLLR {'value': '1'",
    ),
    "deep.json": ("[" * 1000 + "]" * 1000, "not JSON (nested too deeply)"),
    "deep-object.json": ('{"a":' * 1000 + "1" + "}" * 1000, "not JSON (nested too deeply)"),
    "deeper.json": ("[" * 100_000 + "]" * 100_000, "not JSON (nested too deeply)"),
    "record-deep.json": (
        f'{{"epoch_index":5,"participant":"gonka1x","counters":[],"x":{"[" * 900}1{"]" * 900}}}',
        None,
    ),  # readable: its record or a quarantine row, never a traceback
}


def test_ingest_json_bad_numbers_nesting_and_gzip(tmp_path):
    files = {name: text.encode() for name, (text, _) in QUARANTINED.items()} | _gz_variants()
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    warehouse = tmp_path / "warehouse.duckdb"
    proc = _in("ingest-json", *(str(tmp_path / n) for n in files), "--warehouse", str(warehouse))
    _no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line]
    warnings = [line for line in lines if not line.startswith("ingested ")]  # the summary goes to stderr too
    assert len(warnings) == len(lines) - 1, lines
    assert all(line.startswith("warning: ") and line.endswith("; quarantined") for line in warnings), warnings
    q, participants = _frames(
        warehouse,
        "SELECT row_key, reason FROM quarantine WHERE table_name IN ('json_file', 'api_counters')",
        "SELECT source_id, assigned_nonces FROM api_participants",
    )
    reason_of = {}
    for key, reason in q.iter_rows():
        reason_of.setdefault(Path(key.split(":")[0]).name, reason)
    for name, (_, want) in QUARANTINED.items():
        if want is not None:
            assert reason_of[name].startswith(want), (name, reason_of.get(name))
    assert reason_of["badcrc.json.gz"] == "not readable gzip (Error -3 while decompressing data: incorrect data check)"
    assert reason_of["corrupt.json.gz"].startswith("not readable gzip (")
    assert reason_of["truncated.json.gz"] == "not readable gzip (truncated)"
    # the readable gzip files give their record (the padded and two-member ones too), nothing is rounded
    read = {Path(s.removeprefix("json:")).name: n for s, n in participants.iter_rows()}
    assert {read[n] for n in ("ok.json.gz", "padded.json.gz", "two-members.json.gz")} == {3}
    assert "hugeint.json" not in read and "hugeint-epoch.json" not in read
    assert any(w.endswith("truncated.json.gz: not readable gzip (truncated); quarantined") for w in warnings), warnings


def test_ingest_json_strict_exits_3_when_anything_was_quarantined(tmp_path):
    good, bad = tmp_path / "ok.json", tmp_path / "deep.json"
    good.write_text('{"epoch_index":5,"participant":"gonka1x","counters":[],"assigned_nonces":"3"}')
    bad.write_text(QUARANTINED["deep.json"][0])
    clean = _in("ingest-json", str(good), "--strict", "--warehouse", str(tmp_path / "a.duckdb"))
    assert clean.returncode == 0, clean.stderr
    mixed = _in("ingest-json", str(good), str(bad), "--strict", "--warehouse", str(tmp_path / "b.duckdb"))
    _no_traceback(mixed)
    assert mixed.returncode == 3, mixed.stderr
    assert any(
        line.endswith("deep.json: not JSON (nested too deeply); quarantined") for line in mixed.stderr.splitlines()
    )


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory", "missing"])
def test_ingest_json_paths_that_are_not_files_are_one_line_errors(tmp_path, kind):
    path = tmp_path / f"{kind}.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    want = {
        "fifo": "not a regular file (a FIFO)",
        "dev-zero": "not a regular file (a character device)",
        "directory": "not a regular file (a directory)",
        "missing": "no such file",
    }[kind]
    args = ["ingest-json", str(path), "--warehouse", str(tmp_path / "w.duckdb")]
    if kind in ("fifo", "dev-zero"):  # in a subprocess with a timeout: a hang or an endless read fails, not stalls
        proc = _cli(*args, timeout=300)
        _no_traceback(proc)
        assert proc.returncode == 1 and proc.stderr == f"error: {path}: {want}\n", proc.stderr
    else:
        result = runner.invoke(app, args)
        assert result.exit_code == 1 and result.output == f"error: {path}: {want}\n", result.output


# -- fuzz: one-line error or success, never a traceback ------------------------------------------------

_KEYS = [
    "epoch_index",
    "epoch",
    "participant",
    "participant_id",
    "model",
    "counters",
    "assigned_nonces",
    "dispositions",
    "schema_version",
    "count",
    "escrow_id",
    "slot_id",
    "disposition",
    "key",
    "inference_count",
    "missed",
    "invalid",
    "current_epoch_stats",
    "address",
    "invalidLLR",
    "value",
    "exponent",
    "claimed",
    "protocol_only",
    "x",
]
_NUMBERS = st.one_of(
    st.integers(),
    st.integers(min_value=2**62, max_value=2**70),
    st.integers(min_value=-(2**70), max_value=-(2**62)),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([10**30, -(10**30), 2**63, 2**64 - 1]),
)
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    _NUMBERS,
    st.text(max_size=8),
    _NUMBERS.map(str),
    st.sampled_from(["gonka1x", "", "1e999", "9" * 400, "-5", "18446744073709551616"]),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(_KEYS), inner, max_size=6)),
    max_leaves=25,
)


@st.composite
def _files(draw) -> bytes:
    text = json.dumps(draw(_VALUES)).encode()
    depth = draw(st.sampled_from([0, 0, 0, 5, 990, 1100]))
    text = b"[" * depth + text + b"]" * depth
    form = draw(st.sampled_from(["plain", "plain", "gzip", "cut", "gzip-cut", "flip", "exponent"]))
    if form == "exponent":
        text = text.replace(b"1", b"1e999", 1)
    if form.startswith("gzip"):
        text = gzip.compress(text)
    if form.endswith("cut") and text:
        text = text[: draw(st.integers(0, len(text) - 1))]
    if form == "flip" and text:
        at = draw(st.integers(0, len(text) - 1))
        text = text[:at] + bytes([text[at] ^ draw(st.integers(1, 255))]) + text[at + 1 :]
    return text


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz-json")


JSON_FUZZ = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)


@settings(JSON_FUZZ, max_examples=12)  # the heavy tier runs 40 (below)
@given(data=_files())
def test_ingest_json_fuzz_never_a_traceback(fuzz_dir, data):
    path = fuzz_dir / "input.json"
    path.write_bytes(data)
    result = runner.invoke(app, ["ingest-json", str(path), "--warehouse", str(fuzz_dir / "warehouse.duckdb")])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code in (0, 1), result.output
    if result.exit_code == 1:
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    else:
        assert result.output.strip().splitlines()[-1].startswith("ingested 1 file(s): "), result.output


# 40 examples; stands in the default tier: the same on 12 examples,
# tests/ingest/test_bad_payload_and_json_files.py::test_ingest_json_fuzz_never_a_traceback
@pytest.mark.heavy
@settings(JSON_FUZZ, max_examples=40)
@given(data=_files())
def test_ingest_json_fuzz_never_a_traceback_heavy(fuzz_dir, data):
    test_ingest_json_fuzz_never_a_traceback.hypothesis.inner_test(fuzz_dir, data)
