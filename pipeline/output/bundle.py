"""Evidence bundles: every evidence table of one host and window, the charts, the epoch report and
a manifest, written so that anyone holding the same copies can check them file by file.

    files = build_bundle(con, BundleRequest(host="gonka1…", epoch=3))   # relative path → bytes
    write_bundle(files, Path("bundle"))
    checks = verify_bundle(con, Path("bundle"))                           # one FileCheck per file

A bundle holds

- ``tables/NAME.md``, ``.csv`` and ``.json`` for every table of the evidence registry, each
  computed with the options the epoch report asks of it (for a time window: no options, since
  those options are chosen per epoch); a table that cannot be computed (its data was never
  ingested, or it needs something the window does not give) is listed under ``skipped`` with
  the reason;
- ``charts/NAME.svg`` and ``.png`` (for ``--epoch``) for every table that draws one; a chart is
  drawn from the table as the report asks for it, so a time window has none;
- ``report/`` (for ``--epoch``): the epoch report as ``gonka-evidence report epoch`` writes it;
- ``MANIFEST.json``: the pipeline version, the request, the inputs (each source with its label,
  copy time and input digest) and the runs, then every file with its sha256 and the command
  that reproduces it.

Nothing in a bundle depends on the machine, the time or the warehouse's path: the commands name
the warehouse as the bundle's caller named it, so `verify` recomputes the very same bytes from
any warehouse built from the same copies, and names each file that differs.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb
import orjson

from pipeline.core.version import pipeline_version
from pipeline.evidence import EVIDENCE, EvidenceError, EvidenceSpec, compute, report_options
from pipeline.evidence.closure import closure
from pipeline.evidence.provenance import (
    command_line,
    evidence_command,
    labelled_as,
    latest_sources,
    provenance,
    window_args,
)
from pipeline.evidence.window import Window
from pipeline.output.guards.safety import OutputGuard
from pipeline.output.render import render
from pipeline.output.render.json import to_json_value
from pipeline.warehouse.database import out_of_memory, reads_once

MANIFEST = "MANIFEST.json"
BUNDLE_FORMAT = 1
TABLE_FORMATS = {"md": "markdown", "csv": "csv", "json": "json"}


@dataclass(frozen=True)
class BundleRequest:
    host: str
    epoch: int | None = None
    since: str | None = None  # ISO-8601, with until
    until: str | None = None
    warehouse_arg: str | None = None  # how the commands name the warehouse (None: the default)
    finality_lag: timedelta = timedelta(hours=6)  # of the epoch report (the run configuration's)

    @property
    def window(self) -> Window:
        return Window.parse(epoch=self.epoch, since=self.since, until=self.until)

    def command(self, what: str) -> str:
        """The ``gonka-evidence`` command of kind ``what`` (``bundle``, ``report``) for this request."""
        window = self.window
        if what == "report":
            args = ["report", "epoch", str(window.epoch), "--host", self.host]
        else:
            args = [what, "--host", self.host, *window_args(window)]
        return command_line(*args, *(["--warehouse", self.warehouse_arg] if self.warehouse_arg else []))


@dataclass(frozen=True)
class FileCheck:
    path: str
    status: str  # "ok", "differs", "missing" (in the recomputation, not in the bundle), "unexpected"


def build_bundle(con: duckdb.DuckDBPyConnection, request: BundleRequest) -> dict[str, bytes]:
    """Every file of the bundle, relative path → bytes, ``MANIFEST.json`` included."""
    with reads_once(con):  # its tables and report ask the same of the warehouse: its epochs, sources, closure
        return _build_bundle(con, request)


def _build_bundle(con: duckdb.DuckDBPyConnection, request: BundleRequest) -> dict[str, bytes]:
    window = request.window
    if window.epoch is None and window.since is None:
        raise EvidenceError("a bundle needs --epoch N or --since/--until")
    files: dict[str, bytes] = {}
    commands: dict[str, str] = {}
    skipped: list[dict[str, str]] = []
    for spec in EVIDENCE.values():
        options = report_options(con, spec, window.epoch) if window.epoch is not None else {}
        # Over an open epoch, as in the report: computed marked provisional, its command with --allow-open.
        compared = (int(options["compare"]),) if options.get("compare") is not None else ()
        allow_open = not closure(con, window, request.finality_lag, also=compared).closed
        command = evidence_command(spec, request.host, window, options, request.warehouse_arg, allow_open=allow_open)
        try:
            result = compute(
                spec.name,
                con,
                host=request.host,
                epoch=window.epoch,
                since=window.since,
                until=window.until,
                command=command,
                allow_open=allow_open,
                finality_lag=request.finality_lag,
                **options,
            )
        except duckdb.OutOfMemoryException:  # not a table without data: the bundle needs more memory
            raise out_of_memory("the bundle") from None
        except (EvidenceError, duckdb.Error) as exc:
            skipped.append({"table": spec.name, "reason": str(exc).splitlines()[0]})
            continue
        for suffix, fmt in TABLE_FORMATS.items():
            files[f"tables/{spec.name}.{suffix}"] = (render(result, fmt) + "\n").encode()
            commands[f"tables/{spec.name}.{suffix}"] = f"{command} --format {fmt}"
        chart = _chart(spec, result) if window.epoch is not None else None
        if chart is not None:
            files.update(_chart_files(f"charts/{spec.name}", chart))
            commands.update(dict.fromkeys((f"charts/{spec.name}.svg", f"charts/{spec.name}.png"), command))
    if window.epoch is not None:
        for path, data in _report_files(con, request, window.epoch).items():
            files[path] = data
            commands[path] = request.command("report")
    files[MANIFEST] = _manifest(con, request, files, commands, skipped)
    return files


def _chart(spec: EvidenceSpec, result) -> dict | None:
    if spec.report is None or spec.report.chart is None or result.rows.height == 0 or spec.report.view is not None:
        return None  # a chart drawn from a report-only view belongs to the report
    from pipeline.output.render.charts import legible  # loads Altair, as drawing a chart does anyway

    return legible(spec.report.chart(result, result.rows))


def _chart_files(stem: str, chart: dict) -> dict[str, bytes]:
    from pipeline.output.render.images import svg_and_png

    svg, png = svg_and_png(chart)
    return {f"{stem}.svg": svg.encode(), f"{stem}.png": png}


def _report_files(con, request: BundleRequest, epoch: int) -> dict[str, bytes]:
    """The epoch report's files under ``report/``, written as `report epoch` writes them."""
    from pipeline.output.report import build_epoch_report, write_epoch_report

    report = build_epoch_report(
        con,
        epoch,
        request.host,
        finality_lag=request.finality_lag,
        warehouse_arg=request.warehouse_arg,
    )
    with tempfile.TemporaryDirectory(prefix="gonka-evidence-bundle-") as tmp:
        written = write_epoch_report(report, Path(tmp))
        return {
            f"report/{p.relative_to(written).as_posix()}": p.read_bytes()
            for p in sorted(written.rglob("*"))
            if p.is_file()
        }


def _manifest(
    con, request: BundleRequest, files: dict[str, bytes], commands: dict[str, str], skipped: list[dict[str, str]]
) -> bytes:
    prov = provenance(con, request.window, request.command("bundle"))
    document = {
        "bundle_format": BUNDLE_FORMAT,
        "pipeline_version": pipeline_version(),
        "host": request.host,
        "window": request.window.as_dict(),
        # closed or not, said where the bundle is described (an open epoch's tables are provisional)
        "closure": closure(con, request.window, request.finality_lag).as_param(),
        "warehouse_arg": request.warehouse_arg,
        "command": request.command("bundle"),
        "inputs": prov.sources,
        "runs": prov.run_ids,
        "failed_runs": prov.failed_runs,
        "files": [
            {"path": path, "sha256": hashlib.sha256(files[path]).hexdigest(), "command": commands[path]}
            for path in sorted(files)
        ],
        "skipped": skipped,
    }
    return orjson.dumps(to_json_value(document), option=orjson.OPT_INDENT_2) + b"\n"


def write_bundle(files: dict[str, bytes], out: Path) -> Path:
    """Write the bundle into ``out`` whole: staged beside it, then swapped into place in one rename. ``out``
    must be new, an empty directory, or a bundle this pipeline wrote (see `is_own_bundle`); anything
    else is refused and left as it is. A file system that refuses (full, read-only, a mount point that
    cannot be swapped, a path too long) is a one-line EvidenceError, and nothing is left beside `out`."""
    out = Path(out)
    try:
        return _write_bundle(files, out)
    except OSError as exc:
        if exc.errno == errno.EBUSY:  # a mount point cannot be renamed: neither swapped nor moved aside
            raise EvidenceError(
                f"{out}: a mount point, which cannot be replaced in one step; give a directory inside it"
            ) from None
        raise EvidenceError(f"{exc.filename or out}: cannot write the bundle ({exc.strerror or exc})") from None


def _write_bundle(files: dict[str, bytes], out: Path) -> Path:
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise EvidenceError(f"{out}: exists and is not a directory; choose a new or empty directory")
    if out.exists() and any(out.iterdir()) and not is_own_bundle(out):
        raise EvidenceError(
            f"{out}: holds files that are not an unchanged gonka-evidence bundle; choose a new or empty directory"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for path, data in files.items():
            target = staging / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        os.chmod(staging, 0o777 & ~_umask())
        if out.exists():
            _exchange(staging, out)  # staging now holds the old bundle
            shutil.rmtree(staging, ignore_errors=True)
        else:
            staging.rename(out)
    except BaseException:  # a full disk or Ctrl-C leaves no half-written bundle behind
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out


def is_own_bundle(directory: Path) -> bool:
    """Whether `directory` holds exactly a bundle as this pipeline wrote it: a manifest of this format
    and every file it lists, each with the sha256 the manifest gives, and nothing else (no file a
    user added, changed or linked in). Only such a directory is ever replaced."""
    directory = Path(directory)
    present: set[str] = set()
    for root, dirs, names in os.walk(directory):
        for name in [*names, *(d for d in dirs if os.path.islink(os.path.join(root, d)))]:
            path = Path(root, name)
            if path.is_symlink() or not path.is_file():
                return False
            present.add(path.relative_to(directory).as_posix())
    try:
        manifest = orjson.loads((directory / MANIFEST).read_bytes())
        listed = {entry["path"]: entry["sha256"] for entry in manifest["files"]}
        if manifest.get("bundle_format") != BUNDLE_FORMAT or present != {*listed, MANIFEST}:
            return False
        return all(hashlib.sha256((directory / p).read_bytes()).hexdigest() == digest for p, digest in listed.items())
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        return False


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _exchange(a: Path, b: Path) -> None:
    """Swap two directories in one step (Linux renameat2 RENAME_EXCHANGE); where the system cannot,
    `b` is moved aside and `a` renamed into its place, and `a` names the old `b` afterwards either way."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        renameat2 = None
    if renameat2 is not None:
        at_fdcwd, rename_exchange = -100, 2
        if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
            return
    aside = Path(tempfile.mkdtemp(prefix=f".{b.name}.old-", dir=b.parent))
    try:
        os.rename(b, aside / "old")
    except OSError:  # `b` stays where it was (a mount point cannot move): nothing left beside it
        aside.rmdir()
        raise
    try:
        os.rename(a, b)
    except OSError:
        os.rename(aside / "old", b)  # the old bundle back in its place
        aside.rmdir()
        raise
    os.rename(aside / "old", a)
    aside.rmdir()


def read_request(directory: Path) -> BundleRequest:
    """The request a bundle was built for, from its manifest."""
    try:
        manifest = orjson.loads((Path(directory) / MANIFEST).read_bytes())
        window: dict[str, Any] = manifest["window"]
        return BundleRequest(
            host=manifest["host"],
            epoch=window.get("epoch"),
            since=window.get("since"),
            until=window.get("until"),
            warehouse_arg=manifest.get("warehouse_arg"),
        )
    except FileNotFoundError:
        raise EvidenceError(f"{directory}: no {MANIFEST} (not an evidence bundle)") from None
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise EvidenceError(f"{directory}/{MANIFEST}: not a bundle manifest ({exc})") from None


def verify_bundle(
    con: duckdb.DuckDBPyConnection, directory: Path, finality_lag: timedelta = timedelta(hours=6)
) -> list[FileCheck]:
    """Recompute the bundle in ``directory`` from the warehouse behind ``con`` (its epoch report with
    `finality_lag`) and compare every file byte for byte, the manifest included; in path order."""
    return verify_bundle_labelled(con, directory, finality_lag)[0]


def verify_bundle_labelled(
    con: duckdb.DuckDBPyConnection, directory: Path, finality_lag: timedelta = timedelta(hours=6)
) -> tuple[list[FileCheck], list[str]]:
    """`verify_bundle`, and the sources whose label here differs from the bundle's, one line each. A label is
    a name given at ingest, not evidence: the bundle is recomputed under its own labels for the copies whose
    input digest the warehouse holds, so only a difference in the evidence fails."""
    directory = Path(directory)
    relabel, differences = _bundle_labels(con, directory)
    with labelled_as(relabel):
        expected = build_bundle(con, replace(read_request(directory), finality_lag=finality_lag))
    present = {p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file()}
    checks = []
    for path in sorted(present | set(expected)):
        if path not in present:
            status = "missing"
        elif path not in expected:
            status = "unexpected"
        else:
            status = "ok" if (directory / path).read_bytes() == expected[path] else "differs"
        checks.append(FileCheck(path, status))
    return checks, differences


def _bundle_labels(con: duckdb.DuckDBPyConnection, directory: Path) -> tuple[dict[str, str | None], list[str]]:
    """Source id here → the bundle's label, for every source whose input digest the bundle's manifest lists
    under another label; and one line per such source."""
    try:
        inputs = orjson.loads((directory / MANIFEST).read_bytes()).get("inputs") or []
        theirs = {i["input_digest"]: i.get("label") for i in inputs if isinstance(i, dict) and i.get("input_digest")}
    except (OSError, orjson.JSONDecodeError, AttributeError, TypeError):
        return {}, []  # read_request names a bad manifest
    relabel: dict[str, str | None] = {}
    lines = []
    for source in latest_sources(con).to_dicts():  # the warehouse's own labels
        digest = source.get("input_digest")
        if digest in theirs and theirs[digest] != source.get("label"):
            relabel[source["source_id"]] = theirs[digest]
            lines.append(
                f"{source['source_id']}: labelled {source.get('label')!r} here, {theirs[digest]!r} in the bundle"
            )
    return relabel, lines


@dataclass(frozen=True)
class BundleWritten:
    path: Path
    files: list[str]  # relative paths, MANIFEST.json included


@dataclass(frozen=True)
class Verified:
    """A bundle recomputed and compared: one check per file (status ok, differs, missing, unexpected)."""

    checks: list[FileCheck]
    # sources whose label differs from the bundle's (compared under the bundle's labels), one line each
    label_differences: list[str] = field(default_factory=list)

    @property
    def bad(self) -> list[FileCheck]:
        return [check for check in self.checks if check.status != "ok"]

    @property
    def ok(self) -> bool:
        return not self.bad


def bundle_request(
    host: str | None,
    epoch: int | None,
    since: str | None,
    until: str | None,
    warehouse_arg: str | None,
    finality_lag: timedelta | None,
) -> BundleRequest:
    """The bundle's request, checked: a missing host or a bad window is a one-line error before anything is
    computed. `finality_lag` (the epoch report's) is given only with an epoch."""
    if not host:
        raise EvidenceError("bundle needs --host ADDR (the host address, gonka1…)")
    request = BundleRequest(host=host, epoch=epoch, since=since, until=until, warehouse_arg=warehouse_arg)
    if finality_lag is not None:
        request = replace(request, finality_lag=finality_lag)
    _ = request.window  # a bad window is an error here
    return request


def bundle(con: duckdb.DuckDBPyConnection, warehouse: Path, request: BundleRequest, out: Path) -> BundleWritten:
    """The `bundle` task: every file of `request` built and written to `out` whole (never over the warehouse
    or a source)."""
    OutputGuard.of(con, warehouse).check(out, "--out")
    try:
        files = build_bundle(con, request)
    except OSError as exc:  # the epoch report is rendered through a temporary directory
        where = exc.filename or tempfile.gettempdir()
        raise EvidenceError(f"{where}: cannot write the bundle's epoch report ({exc.strerror or exc})") from None
    return BundleWritten(write_bundle(files, out), sorted(files))


def verify(con: duckdb.DuckDBPyConnection, directory: Path, finality_lag: timedelta | None) -> Verified:
    """The `verify` task: the bundle in `directory` recomputed and compared file by file (`finality_lag`:
    its epoch report's, None when it has none)."""
    if finality_lag is None:
        return Verified(*verify_bundle_labelled(con, directory))
    return Verified(*verify_bundle_labelled(con, directory, finality_lag))
