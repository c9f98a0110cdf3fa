"""The console script whatever its standard streams and locale: stdout closed, full (/dev/full) or cut
off by `| head`, stderr closed, a terminal whose encoding cannot show UTF-8. Never a traceback, never
data lost with exit 0, never a stream's error blamed on the warehouse; files are UTF-8 in any locale."""

from __future__ import annotations

import ast
import json
import locale
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.factories import data_samples_warehouse
from tests.helpers import cli_in

ROOT = Path(__file__).resolve().parents[2]
HOST = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"  # the samples' focal host (gonka-evidence.toml)
# A locale whose encoding is ASCII, as a non-UTF-8 locale (LC_ALL=de_DE.ISO-8859-1) is where it is not
# generated: no coercion to C.UTF-8, no UTF-8 mode. Then open() without an encoding is ASCII, and so is stdout.
ASCII_LOCALE = {"LC_ALL": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}


def _cli(args, *, cwd, env=None, **streams) -> subprocess.CompletedProcess:
    environ = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    environ.pop("GONKA_EVIDENCE_HOST", None)
    environ.pop("GONKA_EVIDENCE_WAREHOUSE", None)
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *args], cwd=cwd, env=environ, timeout=300, check=False, **streams
    )


@pytest.fixture
def warehouse(tmp_path) -> Path:
    return data_samples_warehouse(tmp_path / "w.duckdb")


EVIDENCE = ["evidence", "votes-by-build", "--host", HOST, "--epoch", "3", "-w"]


def test_closed_stdout_is_one_line_and_exit_1_never_lost_data(tmp_path, warehouse):
    """`evidence >&-` used to exit 0 with its table lost; `query >&-` ended in a traceback."""
    for args in ([*EVIDENCE, str(warehouse)], ["query", "SELECT 1", "-w", str(warehouse)]):
        # fd 1 closed in the child: a wrapper shell is the portable way.
        done = subprocess.run(
            ["sh", "-c", 'exec "$@" >&-', "sh", sys.executable, "-m", "pipeline.cli", *args],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 1, (args, done.stderr)
        assert done.stderr == "error: standard output: cannot write (it is closed)\n", done.stderr


@pytest.mark.parametrize("command", ["evidence", "doctor", "builds-infer", "run"])
def test_a_full_stdout_is_one_line_not_a_traceback(tmp_path, warehouse, command):
    args = {
        "evidence": [*EVIDENCE[1:], str(warehouse)],
        "doctor": [str(ROOT / "data-samples" / "store")],
        "builds-infer": ["infer", "-w", str(warehouse)],
        "run": [],
    }[command]
    name = {"builds-infer": "builds"}.get(command, command)
    with open("/dev/full", "w") as full:
        done = _cli([name, *args], cwd=tmp_path, stdout=full, stderr=subprocess.PIPE, text=True)
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines()[-1] == "error: standard output: cannot write (No space left on device)", done.stderr
    assert "Traceback" not in done.stderr


def test_a_reader_that_stops_is_not_a_warehouse_error(tmp_path):
    """`run | head -1` said "error: w.duckdb: Broken pipe". Now: quiet, exit 141 as a process killed by
    SIGPIPE (what `yes | head -1` gives)."""
    code, err = _read_one_line_then_stop(["run", "-w", str(tmp_path / "w.duckdb")], tmp_path)
    assert code == 141, err
    assert err == "", err


def _read_one_line_then_stop(args: list[str], cwd: Path) -> tuple[int, str]:
    """The CLI's exit code and stderr when its reader closes the pipe after one line, as `head -1` does."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipeline.cli", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    proc.stdout.readline()
    proc.stdout.close()  # `head -1` has had its line
    err = proc.stderr.read() if proc.stderr else ""
    return proc.wait(timeout=300), err


def test_query_cut_off_by_head_is_quiet(tmp_path, warehouse):
    done = subprocess.run(
        f'"{sys.executable}" -m pipeline.cli query "SELECT * FROM range(2000000)" --format csv -w "{warehouse}" '
        "| head -1",
        shell=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.stdout == "range\n"
    assert done.stderr == "", done.stderr


def test_doctor_cut_off_by_head_exits_141_not_a_silent_1(tmp_path, warehouse):
    """`doctor | head -1` exited 1 with nothing said: Rich's console turns a broken pipe into SystemExit(1)
    behind the command's back. Its stdout is data, so a reader that stops is exit 141, as for `query`."""
    code, err = _read_one_line_then_stop(
        ["doctor", str(ROOT / "data-samples" / "store"), "-w", str(warehouse)], tmp_path
    )
    assert code == 141, err
    assert err == "", err


def test_closed_stderr_still_ingests(tmp_path):
    """stderr closed: `ingest` exited 1 having ingested nothing. A lost summary is no reason to fail."""
    warehouse = tmp_path / "w.duckdb"
    done = subprocess.run(
        ["sh", "-c", 'exec "$@" 2>&-', "sh", sys.executable, "-m", "pipeline.cli", "ingest"]
        + [str(ROOT / "data-samples" / "store"), "-w", str(warehouse)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout
    import duckdb

    with duckdb.connect(str(warehouse), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM ingest_runs WHERE status = 'ok'").fetchone() == (1,)


def test_a_terminal_that_cannot_show_utf8_gets_escapes_not_a_crash(tmp_path, warehouse):
    """`evidence` under ISO-8859-1 or ASCII ended in UnicodeEncodeError on its en dash."""
    outputs = {}
    for name, env in (("latin-1", {"PYTHONIOENCODING": "iso-8859-1"}), ("ascii", ASCII_LOCALE)):
        done = _cli([*EVIDENCE, str(warehouse)], cwd=tmp_path, env=env, capture_output=True)
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        assert b"Traceback" not in done.stderr
        assert b"| V1, no DSpark | validation |" in done.stdout
        outputs[name] = done.stdout
    assert b"| \\u2013 |" in outputs["latin-1"]  # the en dash, escaped


def test_csv_and_json_on_stdout_are_utf8_whatever_the_locale(tmp_path, warehouse):
    """`evidence --format csv` under ISO-8859-1 or ASCII wrote a build label's en dash as the six characters
    ``\\u2013``: another value. csv and json are now the UTF-8 bytes of a UTF-8 locale, as `query` writes;
    markdown keeps the terminal's escapes (the test above)."""
    label = "V2 – DSpark, é, 🚀"  # an en dash, a Latin-1 letter and a character beyond the BMP
    builds = (ROOT / "data-samples" / "builds.toml").read_text(encoding="utf-8")
    (tmp_path / "builds.toml").write_text(builds.replace("V2 + DSpark, raw_logprobs", label), encoding="utf-8")
    assert cli_in(tmp_path, "builds", "load", "builds.toml", "-w", str(warehouse)).returncode == 0
    for fmt, name, env in (("csv", "latin-1", {"PYTHONIOENCODING": "iso-8859-1"}), ("json", "ascii", ASCII_LOCALE)):
        reference = cli_in(tmp_path, *EVIDENCE, str(warehouse), "--format", fmt)  # this process: UTF-8 streams
        done = _cli([*EVIDENCE, str(warehouse), "--format", fmt], cwd=tmp_path, env=env, capture_output=True)
        assert done.returncode == 0, (name, done.stderr.decode(errors="replace"))
        assert done.stdout == reference.stdout.encode("utf-8"), (fmt, name)
        assert label.encode("utf-8") in done.stdout and b"\\u" not in done.stdout, (fmt, name)
    assert label in {row["build"] for row in json.loads(done.stdout)["rows"]}


def test_files_are_utf8_whatever_the_locale(tmp_path, warehouse):
    """`report` and `bundle` ended in UnicodeEncodeError under a non-UTF-8 locale. Now they finish, and a
    report is the same bytes as under a UTF-8 locale. (`run`, a whole run of the samples: the heavy test below.)"""
    reports = {}
    for name, env in (("utf8", {"LC_ALL": "C.UTF-8"}), ("ascii", ASCII_LOCALE)):
        (tmp_path / name).mkdir()
        args = ["report", "epoch", "3", "--host", HOST, "-w", str(warehouse), "--out", "out"]
        if name == "utf8" and locale.getpreferredencoding(False).lower().replace("-", "") == "utf8":
            # this process's locale is a UTF-8 one already: the reference report in-process
            done_here = cli_in(
                tmp_path / name, *args, env={"GONKA_EVIDENCE_HOST": None, "GONKA_EVIDENCE_WAREHOUSE": None}
            )
            assert done_here.returncode == 0, done_here.stderr
        else:
            done = _cli(args, cwd=tmp_path / name, env=env, capture_output=True)
            assert done.returncode == 0, done.stderr.decode(errors="replace")
        reports[name] = {
            p.relative_to(tmp_path / name).as_posix(): p.read_bytes()
            for p in sorted((tmp_path / name / "out").rglob("*"))
            if p.is_file()
        }
    assert reports["utf8"] == reports["ascii"]
    assert "–".encode() in reports["ascii"]["out/epoch-3/report.md"]
    # The bundle's own files (tables, charts, manifest) over an hour's window: an epoch's bundle adds the epoch
    # report, written as `report` writes it (above), at three times the work.
    window = ["--since", "2026-10-29T00:00:00", "--until", "2026-10-29T01:00:00"]
    done = _cli(
        ["bundle", "--host", HOST, *window, "-w", str(warehouse), "--out", "b"],
        cwd=tmp_path,
        env=ASCII_LOCALE,
        capture_output=True,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert "–".encode() in (tmp_path / "b" / "tables" / "votes-by-build.md").read_bytes()  # not ASCII, written


# stands in the default tier: tests/cli/test_streams_and_locale.py::test_files_are_utf8_whatever_the_locale
# (the reports and bundle a run writes, under the same locale),
# tests/cli/test_streams_and_locale.py::test_every_text_file_the_pipeline_opens_names_its_encoding
# (every text file the pipeline opens names its encoding, run's included)
@pytest.mark.heavy
def test_run_writes_utf8_whatever_the_locale(tmp_path):
    """`run` ended in UnicodeEncodeError under a non-UTF-8 locale. Now it finishes, its report in UTF-8."""
    (tmp_path / "run").mkdir()
    done = _cli(["run"], cwd=tmp_path / "run", env=ASCII_LOCALE, capture_output=True)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert "–".encode() in (tmp_path / "run" / "out" / "epoch-3" / "report.md").read_bytes()


def test_every_text_file_the_pipeline_opens_names_its_encoding():
    """The guard behind the test above: open(), read_text() and write_text() in text mode without
    encoding= use the locale's encoding (ASCII under LC_ALL=C), which is how run and report failed."""
    missing = []
    for path in sorted((ROOT / "pipeline").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or any(k.arg == "encoding" for k in node.keywords):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in ("read_text", "write_text"):
                if len(node.args) < (1 if name == "read_text" else 2):
                    missing.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            elif name == "open" and isinstance(func, ast.Name):
                mode = (
                    node.args[1]
                    if len(node.args) > 1
                    else next((k.value for k in node.keywords if k.arg == "mode"), None)
                )
                if mode is None or (isinstance(mode, ast.Constant) and "b" not in str(mode.value)):
                    if not (node.args and isinstance(node.args[0], ast.Attribute) and node.args[0].attr == "devnull"):
                        missing.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not missing, missing
