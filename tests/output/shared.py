"""Outputs built once per test session and read by several test files: the bundled `run`, the samples' bundle.

pytest-xdist spreads files over workers, so a per-process fixture would build each again in every worker: the
first caller builds under a lock in the directory the workers share, the others wait and read. Callers read the
directory, never write it (copy it to change anything)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HOST = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"  # focal host of data-samples/


def built_once(tmp_path_factory: Any, name: str, build: Callable[[Path], None]) -> Path:
    """The directory `build` filled, built by the session's first caller (of any worker)."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the session's directory, above each worker's own
    done = shared / f"shared-{name}"
    with open(shared / f"shared-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, a failed build included
        if not done.exists():
            work = shared / f"shared-{name}.building"
            shutil.rmtree(work, ignore_errors=True)  # what a failed build left
            work.mkdir()
            build(work)
            work.rename(done)  # whole or not at all: a reader never meets half a build
    return done


@dataclass(frozen=True)
class BundledRun:
    directory: Path  # where the run worked: ./warehouse.duckdb and ./out
    said: list[str]  # the lines its listener was given
    warned: list[str]  # the warnings its listener was given
    log: list[str]  # RunOutcome.log
    written: list[int]  # RunOutcome.written
    index: str | None  # RunOutcome.index


def bundled_run(tmp_path_factory: Any) -> BundledRun:
    """The bundled run (no configuration: data-samples/ and its vLLM log) through `pipeline.api.run`, with a
    listener, in a directory of its own."""

    def build(directory: Path) -> None:
        from pipeline import api

        said: list[str] = []
        warned: list[str] = []
        cwd, environ = os.getcwd(), dict(os.environ)
        os.chdir(directory)
        for key in [k for k in os.environ if k.startswith("GONKA_EVIDENCE_")]:
            del os.environ[key]  # no configuration at all: no environment defaults either
        try:
            outcome = api.run(listener=api.Listener(line=said.append, warning=warned.append))
        finally:
            os.chdir(cwd)
            os.environ.clear()
            os.environ.update(environ)
        told = {"said": said, "warned": warned, "log": outcome.log, "written": outcome.written}
        told["index"] = None if outcome.index is None else str(outcome.index)
        (directory / "outcome.json").write_text(json.dumps(told))

    directory = built_once(tmp_path_factory, "bundled-run", build)
    return BundledRun(directory, **json.loads((directory / "outcome.json").read_text()))


def samples_bundle(tmp_path_factory: Any) -> Path:
    """A directory with ./warehouse.duckdb (data-samples/, labelled data-samples, with its builds) and ./bundle,
    `gonka-evidence bundle --host HOST --epoch 3 --out bundle` run there."""

    def build(directory: Path) -> None:
        from tests.factories import data_samples_warehouse

        data_samples_warehouse(directory / "warehouse.duckdb")
        succeeds_in(directory, "bundle", "--host", HOST, "--epoch", "3", "--out", "bundle")

    return built_once(tmp_path_factory, "samples-bundle", build)


def succeeds_in(directory: Path, *args: str) -> None:
    """`gonka-evidence ARGS` run in-process with `directory` as the working directory; it must exit 0."""
    from typer.testing import CliRunner

    from pipeline.cli.app import app

    with contextlib.chdir(directory):
        result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output


def bundle_computed_once(monkeypatch: Any) -> list[dict]:
    """From now to the end of the test, `build_bundle` computes for real once and gives every later call the same
    files (for tests of what a command does with a bundle, not of what it computes); the list holds that one
    computation once it ran."""
    import pipeline.output.bundle

    real, computed = pipeline.output.bundle.build_bundle, []

    def computed_once(con, request):
        if not computed:
            computed.append(real(con, request))
        return dict(computed[0])

    monkeypatch.setattr(pipeline.output.bundle, "build_bundle", computed_once)
    return computed
