"""The console script whatever its standard streams and locale: stdout closed, full (/dev/full) or cut
off by `| head`, stderr closed, a terminal whose encoding cannot show UTF-8. Never a traceback, never
data lost with exit 0, never a stream's error blamed on the warehouse; files are UTF-8 in any locale."""

from __future__ import annotations

import ast
import contextlib
import io
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


@contextlib.contextmanager
def _ascii_locale_here():
    """This process under LC_CTYPE=C, as a process started under ASCII_LOCALE is: open(), read_text() and
    write_text() without encoding= use ASCII until the end of the block."""
    before = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        assert codecs_name(locale.getpreferredencoding(False)) == "ascii"  # else this test checks nothing
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, before)


def codecs_name(encoding: str) -> str:
    import codecs

    return codecs.lookup(encoding).name


def _console_script_here(
    cwd: Path, args: list[str], encoding: str, capfdbinary, stdout: str | None = None
) -> tuple[int, bytes, bytes]:
    """The console script in this process: `streams.install()` over standard streams whose encoding is
    `encoding` (as PYTHONIOENCODING or the locale gives a process) and, given `stdout`, over a descriptor 1
    that is closed ("closed", as `>&-` leaves it) or that file ("/dev/full"), then the command. Its exit code,
    stdout and stderr as the bytes written to descriptors 1 and 2.
    What a reader that goes away, a signal or the locale at start-up does needs a process of its own."""
    from pipeline.cli.app import app
    from pipeline.core import streams

    capfdbinary.readouterr()
    saved = sys.stdin, sys.stdout, sys.stderr, sys.argv
    environ = {
        name: os.environ.pop(name) for name in ("GONKA_EVIDENCE_HOST", "GONKA_EVIDENCE_WAREHOUSE") if name in os.environ
    }
    fd1 = os.dup(1)
    sys.stdout = io.TextIOWrapper(io.BytesIO(), encoding=encoding)  # what install() takes the encoding from
    sys.stderr = io.TextIOWrapper(io.BytesIO(), encoding=encoding)
    sys.argv = ["gonka-evidence", *args]
    code: int | str | None = 0
    try:
        if stdout == "closed":
            os.close(1)
        elif stdout is not None:
            replaced = os.open(stdout, os.O_WRONLY)
            os.dup2(replaced, 1)
            os.close(replaced)
        streams.install()
        with contextlib.chdir(cwd):
            app(args=args, prog_name="gonka-evidence")
    except SystemExit as done:
        code = done.code
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()
        os.dup2(fd1, 1)  # before the streams made here go: what they could not write is flushed there, not lost
        os.close(fd1)
        sys.stdin, sys.stdout, sys.stderr, sys.argv = saved
        os.environ.update(environ)
    captured = capfdbinary.readouterr()
    return int(code or 0), captured.out, captured.err


# a process whose descriptor 1 is closed at its start; stands in the default tier:
# tests/cli/test_streams_and_locale.py::test_closed_stdout_is_one_line_and_exit_1_in_the_console_script_here
@pytest.mark.heavy
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


def test_closed_stdout_is_one_line_and_exit_1_in_the_console_script_here(tmp_path, warehouse, capfdbinary):
    """The test above in this process: descriptor 1 closed before the console script's streams are made."""
    for args in ([*EVIDENCE, str(warehouse)], ["query", "SELECT 1", "-w", str(warehouse)]):
        code, _, err = _console_script_here(tmp_path, args, "utf-8", capfdbinary, stdout="closed")
        assert code == 1, (args, err)
        assert err == b"error: standard output: cannot write (it is closed)\n", err


def test_a_full_stdout_is_one_line_in_the_console_script_here(tmp_path, warehouse, capfdbinary):
    """The evidence and doctor cases of the test below in this process: descriptor 1 on /dev/full."""
    for args in ([*EVIDENCE, str(warehouse)], ["doctor", str(ROOT / "data-samples" / "store")]):
        code, _, err = _console_script_here(tmp_path, args, "utf-8", capfdbinary, stdout="/dev/full")
        assert code == 1, err
        assert err.decode().splitlines()[-1] == "error: standard output: cannot write (No space left on device)", err
        assert b"Traceback" not in err


# a process of its own per command (evidence and doctor); stands in the default tier:
# tests/cli/test_streams_and_locale.py::test_a_full_stdout_is_one_line_in_the_console_script_here
IN_PROCESS_TOO = pytest.mark.heavy


@pytest.mark.parametrize(
    "command",
    [
        pytest.param("evidence", marks=IN_PROCESS_TOO),
        pytest.param("doctor", marks=IN_PROCESS_TOO),
        "builds-infer",
        "run",
    ],
)
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


def test_closed_stderr_still_ingests(tmp_path, sqlite_copy):
    """stderr closed: `ingest` exited 1 having ingested nothing. A lost summary is no reason to fail. (A store of
    one epoch: the summary it cannot say is the same line.)"""
    warehouse = tmp_path / "w.duckdb"
    done = subprocess.run(
        ["sh", "-c", 'exec "$@" 2>&-', "sh", sys.executable, "-m", "pipeline.cli", "ingest"]
        + [str(sqlite_copy(1)), "-w", str(warehouse)],
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


# the process's encoding from PYTHONIOENCODING and the locale; stands in the default tier:
# tests/cli/test_streams_and_locale.py::test_a_terminal_that_cannot_show_utf8_escapes_in_the_console_script_here
@pytest.mark.heavy
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


def test_a_terminal_that_cannot_show_utf8_escapes_in_the_console_script_here(tmp_path, warehouse, capfdbinary):
    """The test above in this process: the console script's streams over a Latin-1 or an ASCII terminal."""
    outputs = {}
    for name, encoding in (("latin-1", "iso-8859-1"), ("ascii", "ascii")):
        with _ascii_locale_here() if name == "ascii" else contextlib.nullcontext():
            code, out, err = _console_script_here(tmp_path, [*EVIDENCE, str(warehouse)], encoding, capfdbinary)
        assert code == 0, err.decode(errors="replace")
        assert b"Traceback" not in err
        assert b"| V1, no DSpark | validation |" in out
        outputs[name] = out
    assert b"| \\u2013 |" in outputs["latin-1"]  # the en dash, escaped


# the process's encoding from PYTHONIOENCODING and the locale; stands in the default tier:
# tests/cli/test_streams_and_locale.py::test_csv_and_json_on_stdout_are_utf8_in_the_console_script_here
@pytest.mark.heavy
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


def _builds_labelled(tmp_path: Path, warehouse: Path, label: str) -> None:
    builds = (ROOT / "data-samples" / "builds.toml").read_text(encoding="utf-8")
    (tmp_path / "builds.toml").write_text(builds.replace("V2 + DSpark, raw_logprobs", label), encoding="utf-8")
    assert cli_in(tmp_path, "builds", "load", "builds.toml", "-w", str(warehouse)).returncode == 0


def test_csv_and_json_on_stdout_are_utf8_in_the_console_script_here(tmp_path, warehouse, capfdbinary):
    """The test above in this process: the console script's streams over a Latin-1 or an ASCII terminal."""
    label = "V2 – DSpark, é, 🚀"  # an en dash, a Latin-1 letter and a character beyond the BMP
    _builds_labelled(tmp_path, warehouse, label)
    for fmt, name, encoding in (("csv", "latin-1", "iso-8859-1"), ("json", "ascii", "ascii")):
        reference = cli_in(tmp_path, *EVIDENCE, str(warehouse), "--format", fmt)  # UTF-8 streams
        with _ascii_locale_here() if name == "ascii" else contextlib.nullcontext():
            code, out, err = _console_script_here(
                tmp_path, [*EVIDENCE, str(warehouse), "--format", fmt], encoding, capfdbinary
            )
        assert code == 0, (name, err.decode(errors="replace"))
        assert out == reference.stdout.encode("utf-8"), (fmt, name)
        assert label.encode("utf-8") in out and b"\\u" not in out, (fmt, name)
    assert label in {row["build"] for row in json.loads(out)["rows"]}


def test_files_are_utf8_under_an_ascii_locale_here(tmp_path, warehouse, monkeypatch):
    """The test below in this process, under LC_CTYPE=C: the report is built and written under it, and is the
    same bytes as the same report written under this process's UTF-8 locale; the bundle's own files are
    written, not ASCII."""
    from pipeline.output.report import task

    utf8 = locale.setlocale(locale.LC_CTYPE)
    assert codecs_name(locale.getpreferredencoding(False)) == "utf-8"  # the reference: a UTF-8 locale
    write_here = task.write_epoch_report

    def also_under_utf8(built, out: Path) -> Path:  # the built report written twice: under UTF-8, then as asked
        ascii_ctype = locale.setlocale(locale.LC_CTYPE)
        locale.setlocale(locale.LC_CTYPE, utf8)
        try:
            with contextlib.chdir(tmp_path / "utf8"):
                task.claim_output_dir(out)
                write_here(built, out)
        finally:
            locale.setlocale(locale.LC_CTYPE, ascii_ctype)
        written_under.append(codecs_name(locale.getpreferredencoding(False)))
        return write_here(built, out)

    written_under: list[str] = []
    monkeypatch.setattr(task, "write_epoch_report", also_under_utf8)
    (tmp_path / "utf8").mkdir()
    (tmp_path / "ascii").mkdir()
    args = ["report", "epoch", "3", "--host", HOST, "-w", str(warehouse), "--out", "out"]
    unset = {"GONKA_EVIDENCE_HOST": None, "GONKA_EVIDENCE_WAREHOUSE": None}
    with _ascii_locale_here():
        done = cli_in(tmp_path / "ascii", *args, env=unset)
    assert done.returncode == 0, done.stderr
    assert written_under == ["ascii"]  # the report asked for was written under the ASCII locale
    reports = {
        name: {
            p.relative_to(tmp_path / name).as_posix(): p.read_bytes()
            for p in sorted((tmp_path / name / "out").rglob("*"))
            if p.is_file()
        }
        for name in ("utf8", "ascii")
    }
    assert reports["utf8"] == reports["ascii"]
    assert "–".encode() in reports["ascii"]["out/epoch-3/report.md"]
    window = ["--since", "2026-10-29T00:00:00", "--until", "2026-10-29T01:00:00"]
    with _ascii_locale_here():
        done = cli_in(tmp_path, "bundle", "--host", HOST, *window, "-w", str(warehouse), "--out", "b", env=unset)
    assert done.returncode == 0, done.stderr
    assert "–".encode() in (tmp_path / "b" / "tables" / "votes-by-build.md").read_bytes()  # not ASCII, written


# a process started under an ASCII locale (its streams and file names too); stands in the default tier:
# tests/cli/test_streams_and_locale.py::test_files_are_utf8_under_an_ascii_locale_here
@pytest.mark.heavy
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


# stands in the default tier: tests/cli/test_streams_and_locale.py::test_files_are_utf8_under_an_ascii_locale_here
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
