"""`gonka-evidence run`: the scheduled job.

One run, in order:

1. take the run lock (``<warehouse>.run.lock``, an ``flock``): a second run while one is
   working stops at once with a one-line message and exit code 1;
2. stage the warehouse: copy it to ``<warehouse>.run-<pid>.tmp`` beside it (a reflink where
   the filesystem offers one) and work on the copy only, so analysts keep reading the
   warehouse (DuckDB lets no other process open a file that one process writes);
3. ingest every configured source (what is new only), reload the builds file;
4. write the report of every epoch closed since the last report, and rewrite the report of
   the newest closed epoch when its content fingerprint changed;
5. publish: if anything changed (data, reports, or the stamp an ingest left for an unchanged
   copy, pipeline/ingest/unchanged.py), atomically rename the copy over the warehouse (readers that
   opened the old file keep reading it whole; the next open sees the new state); if nothing
   changed, drop the copy, so a second run in a row changes no byte.

An epoch is **closed** when every one of its escrows in the warehouse is settled (closed at
its last settlement), or, when some escrow never settles, once the data clock has passed its
last settlement by ``finality_lag`` (closed at last settlement + lag). The data clock is the
newest copy time of any successful ingest (the newest event at the head of a copy), so a run
over old copies decides exactly as it did when they were fresh. An epoch with no settled
escrow stays open. See the named query ``closed_epochs``.

State lives in the warehouse: ``epoch_reports`` (host, epoch, closure, fingerprint, directory).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import shutil
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from glob import escape as glob_escape
from pathlib import Path

import duckdb
import polars as pl

from pipeline.core import events
from pipeline.core.paths import DEFAULT_WAREHOUSE
from pipeline.core.streams import StandardStreamError
from pipeline.core.times import iso_utc
from pipeline.ingest.kinds import SOURCE_KINDS
from pipeline.ingest.runs import IngestSummary
from pipeline.ingest.unchanged import STAMP_PREFIX
from pipeline.jobs.config import (  # noqa: F401 (re-exported: the config used to live here)
    CONFIG_KEYS,
    RunConfig,
    load_config,
    sample_config,
    source_kind,
)
from pipeline.jobs.settings import Settings
from pipeline.output import summaries
from pipeline.warehouse.database import WarehouseError, abort_abandoned_runs, fetch_frame, open_for_write, transaction
from pipeline.warehouse.held import check_value

# Tables whose rows record that a run happened rather than what the data is: they do not make a run "changed".
BOOKKEEPING_TABLES = ("ingest_runs", "ingest_accounting", "warehouse_meta")  # per-run records
BOOKKEEPING_COLUMNS = ("run_id",)
REPORTS_TABLE = "epoch_reports_t"  # the one table the reports step writes
STAMPS_PART = "warehouse_meta:unchanged"  # the content part of the unchanged-copy stamps


@dataclass
class RunOutcome:
    ingested: list = field(default_factory=list)  # IngestSummary per source
    written: list[int] = field(default_factory=list)  # epochs whose report is new
    rewritten: list[int] = field(default_factory=list)  # epochs whose report changed
    index: Path | None = None  # OUTPUT/index.html when this run rebuilt it
    published: bool = False
    closure: pl.DataFrame | None = None  # closed_epochs with closes_by_lag_at, when a host is configured
    log: list[str] = field(default_factory=list)  # the run's log lines, as said to the caller


NOTHING_REPLACED = "the run stopped and replaced nothing (the warehouse is as it was)"


class RunError(WarehouseError):
    """A run stopped by a file it could not write (a full disk, a read-only directory); one-line message."""


# --- lock and staging -----------------------------------------------------------------------------------


@contextmanager
def run_lock(warehouse: Path) -> Iterator[None]:
    """Hold ``<warehouse>.run.lock`` for the whole run; fail at once if another run holds it.

    The file exists only while a run holds it: the holder removes it before it lets go, however
    the run ends. A run that opened the file just before the holder removed it finds, once it
    holds the lock, that the path is gone or names another file, and takes the lock again."""
    path = Path(f"{warehouse}.run.lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            raise WarehouseError(
                f"another `gonka-evidence run` is working on {warehouse} ({holder}); this run did nothing "
                "and exits — the next scheduled run picks up where that one ends"
            ) from None
        if _same_file(fd, path):
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since {started}\n".encode(), 0)
        yield
    finally:
        path.unlink(missing_ok=True)  # while still holding it: nobody can take a lock on a file about to go
        os.close(fd)  # closing the descriptor releases the flock


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(fd), path.stat())
    except FileNotFoundError:
        return False


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, under another user
        return True
    return True


def remove_debris(warehouse: Path, output: Path, own: bool = False) -> list[Path]:
    """Remove what killed runs left: warehouse copies (``<warehouse>.run-PID.tmp``) and report
    staging directories (``OUTPUT/.epoch-N.tmp-PID``) whose process is gone, or, with `own`, those
    of this process (a run that failed); returns what went. A report set aside while its new
    version was renamed in (``.epoch-N.old-PID``) goes back into place when that never happened."""
    found = [
        (p, p.name.removeprefix(f"{warehouse.name}.run-").split(".", 1)[0])
        for p in warehouse.parent.glob(f"{glob_escape(warehouse.name)}.run-*.tmp*")
    ]
    if output.is_dir():
        found += [
            (p, p.name.rpartition("-")[2]) for p in [*output.glob(".epoch-*.tmp-*"), *output.glob(".epoch-*.old-*")]
        ]
    removed = []
    for path, pid in found:
        if not pid.isdigit():
            continue
        if not (int(pid) == os.getpid() if own else not _pid_alive(int(pid))):
            continue
        report = output / path.name[1:].rpartition(".old-")[0]  # .epoch-N.old-PID → epoch-N
        if ".old-" in path.name and not report.exists():
            path.rename(report)
        elif path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def _file_state(path: Path) -> tuple | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _clone(src: Path, dst: Path) -> None:
    """Copy a file, as a reflink (constant time) where the filesystem supports FICLONE."""
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        try:
            fcntl.ioctl(fout.fileno(), 0x40049409, fin.fileno())  # FICLONE
            return
        except OSError:
            pass
        shutil.copyfileobj(fin, fout, 16 << 20)


@dataclass
class StagedWarehouse:
    target: Path
    path: Path
    origin_state: tuple | None


@contextmanager
def staged_warehouse(target: Path) -> Iterator[StagedWarehouse]:
    """A private copy of the warehouse to write; `publish_staged` renames it into place."""
    wal = Path(f"{target}.wal")
    if wal.exists():  # a writer stopped without a checkpoint: fold its WAL in before copying
        open_for_write(target).close()
    staged = StagedWarehouse(target, target.with_name(f"{target.name}.run-{os.getpid()}.tmp"), _file_state(target))
    _remove(staged.path)
    if target.exists():
        _clone(target, staged.path)
    try:
        yield staged
    finally:
        _remove(staged.path)


def publish_staged(staged: StagedWarehouse) -> None:
    if _file_state(staged.target) != staged.origin_state or Path(f"{staged.target}.wal").exists():
        raise WarehouseError(
            f"{staged.target} changed while this run worked on a copy (another writer, e.g. `gonka-evidence ingest`); "
            "nothing was replaced — run again"
        )
    os.replace(staged.path, staged.target)


def _remove(path: Path) -> None:
    for p in (path, Path(f"{path}.wal")):
        p.unlink(missing_ok=True)


def content_parts(con: duckdb.DuckDBPyConnection, tables: tuple[str, ...] | None = None) -> dict[str, str]:
    """Per table (all, or `tables`): its row count and a hash of its rows, except run bookkeeping (the
    run tables, and the ``run_id`` that upserts stamp on rows they rewrite unchanged). Equal parts
    mean equal data."""
    columns = fetch_frame(
        con,
        """
        SELECT table_name, list(column_name ORDER BY column_index) AS columns FROM duckdb_columns()
        WHERE schema_name = 'main' AND table_name IN (SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main')
        GROUP BY ALL ORDER BY table_name""",
    )
    parts = {}
    for name, cols in columns.iter_rows():
        if name in BOOKKEEPING_TABLES or (tables is not None and name not in tables):
            continue
        kept = ", ".join(f'"{c}"' for c in cols if c not in BOOKKEEPING_COLUMNS)
        n, h = con.execute(f'SELECT count(*), coalesce(sum(hash({kept})::HUGEINT), 0) FROM "{name}"').fetchall()[0]
        parts[name] = f"{n}:{h}"
    if tables is None:
        # Of the bookkeeping, the stamps of unchanged copies count (pipeline/ingest/unchanged.py): a run whose
        # full ingest of an unchanged copy left the first stamp publishes it, or every later run
        # would read that copy in full again.
        n, h = con.execute(
            f"SELECT count(*), coalesce(sum(hash(key, value)::HUGEINT), 0) FROM warehouse_meta "
            f"WHERE starts_with(key, '{STAMP_PREFIX}')"
        ).fetchall()[0]
        parts[STAMPS_PART] = f"{n}:{h}"
    return parts


def _digest(parts: dict[str, str]) -> str:
    """`content_parts` as one hash."""
    return hashlib.sha256("\n".join(f"{name}:{part}" for name, part in sorted(parts.items())).encode()).hexdigest()


# --- the job --------------------------------------------------------------------------------------------


def run_job(config_path: Path | None, warehouse: Path | None, settings: Settings | None = None) -> RunOutcome:
    """One run (see the module docstring) with `settings` (None: resolved from `config_path` and `warehouse`).
    Its log lines go to the caller's listener (`pipeline.core.events`), one fact each; `pipeline.api.run`
    also keeps them in `RunOutcome.log`."""
    run_line = events.say
    settings = settings or Settings.resolve(warehouse, config=config_path)
    cfg = settings.run
    _check_paths(cfg)
    _check_samples_warehouse(settings)
    if cfg.warehouse.is_symlink():  # the new version replaces the file the link names, never the link
        cfg.warehouse = Path(os.path.realpath(cfg.warehouse))
    run_line(f"config: {cfg.origin}; warehouse: {cfg.warehouse}; output: {cfg.output}")
    outcome = RunOutcome()
    try:
        cfg.warehouse.parent.mkdir(parents=True, exist_ok=True)
        with run_lock(cfg.warehouse):
            for path in remove_debris(cfg.warehouse, cfg.output):
                run_line(f"removed {path}: left by an interrupted run")
            try:
                with staged_warehouse(cfg.warehouse) as staged:
                    _run_on_copy(staged, cfg, outcome)
            except BaseException:
                remove_debris(cfg.warehouse, cfg.output, own=True)  # e.g. a report half-written when the disk filled
                raise
    except StandardStreamError:  # the run's log could not be written: not the warehouse's fault
        raise
    except OSError as exc:  # a full disk, a read-only directory: the file and the reason, no traceback
        where = exc.filename or cfg.warehouse
        raise RunError(f"{where}: {exc.strerror or exc}; {NOTHING_REPLACED}") from None
    except (duckdb.IOException, duckdb.TransactionException) as exc:  # DuckDB's own writes (a failed commit included)
        raise RunError(f"{cfg.warehouse}: {str(exc).splitlines()[0]}; {NOTHING_REPLACED}") from None
    _print_outcome(outcome, cfg)
    return outcome


def _check_paths(cfg: RunConfig) -> None:
    """The config's paths in their roles, before any work: its sources and builds file can be read, the report
    directory and the warehouse are never a source or inside one, and the report directory is new, empty or
    the tool's own."""
    from pipeline.core.roles import Role
    from pipeline.output.guards.roles import check_outputs, check_path

    # Each input the run reads in its role, named by its config key: a FIFO, a device, a symlink loop or a
    # missing path is one line before anything is opened or ingested.
    for i, source in enumerate(cfg.sources, 1):
        if "path" in source:
            check_path(Path(source["path"]), Role.INPUT, f"{cfg.origin}: [[sources]] entry {i} path")
    if cfg.builds is not None:
        check_path(cfg.builds, Role.INPUT_FILE, cfg.named("builds"), noun="builds file")
    inputs = [Path(s["path"]) for s in cfg.sources if "path" in s] + ([cfg.builds] if cfg.builds else [])
    warehouse, output = (Path(os.path.realpath(p)) for p in (cfg.warehouse, cfg.output))
    if warehouse == output or warehouse in output.parents:
        raise RunError(
            f"{cfg.named('warehouse')} {cfg.warehouse} and {cfg.named('output')} {cfg.output} name the same path; "
            "give the reports a directory of their own"
        )
    # Each named by the option or variable that set it, else as the config's.
    output_named, warehouse_named = (cfg.set_by.get(key, f"config {key}") for key in ("output", "warehouse"))
    check_outputs({output_named: cfg.output, warehouse_named: cfg.warehouse}, inputs=inputs)
    check_path(cfg.output, Role.OUTPUT_DIR, output_named)


def _run_on_copy(staged: StagedWarehouse, cfg: RunConfig, outcome: RunOutcome) -> None:
    """Steps 3–5 of a run, on the staged copy of the warehouse."""
    from pipeline.ingest.builds import load_builds
    from pipeline.ingest.chain import load_chain_params
    from pipeline.output.query.execute import named_queries, run_query

    con = open_for_write(staged.path, abort_abandoned=False)
    try:
        before = content_parts(con)
        # Not data, so not in the stamp; but a correction worth publishing.
        aborted = abort_abandoned_runs(con)
        if aborted:
            events.say(f"ingest_runs: {aborted} run(s) left `running` by a killed writer marked aborted")
        for source in cfg.sources:
            kind = source_kind(source)
            outcome.ingested.append(summary := SOURCE_KINDS[kind].ingest(con, source, cfg))
            say(source_summary(con, summary, kind, source))
        if cfg.builds is not None:
            n = load_builds(con, cfg.builds)
            events.say(f"host_builds: {n} entries from {cfg.builds}")
        load_chain_params(con, cfg.chain)
        if events.verbose():  # the tables behind the reports; by default the summary only
            events.listener().table(run_query(con, named_queries()["epoch_summary"].sql, {}), "per-epoch summary")
            if cfg.host:
                print_host_evidence(con, cfg.host)
        data = content_parts(con)  # what the reports are built from
        if cfg.host:
            write_due_reports(con, cfg, outcome, data)
            write_index_if_due(con, cfg, outcome)
            print_preflight(con, cfg.host)
        else:
            events.say("no host configured: no reports (set host in the config or GONKA_EVIDENCE_HOST)")
        # The reports write only their own table: the rest was hashed above.
        changed = aborted > 0 or data | content_parts(con, (REPORTS_TABLE,)) != before
        con.execute("CHECKPOINT")
    finally:
        con.close()
    if changed or not staged.origin_state:
        publish_staged(staged)
        outcome.published = True


def print_host_evidence(con: duckdb.DuckDBPyConnection, host: str) -> None:
    """The core evidence tables of the configured (or the samples' focal) host, as Markdown text blocks."""
    from pipeline.evidence import compute
    from pipeline.evidence.provenance import command_line
    from pipeline.output.render import render

    for name in ("epoch-summary", "votes-by-build", "peer-invalidation"):  # over all data: marked when some is open
        command = command_line("evidence", name, "--host", host, "--allow-open")
        events.listener().text(render(compute(name, con, host=host, command=command, allow_open=True), "markdown"))


def print_preflight(con: duckdb.DuckDBPyConnection, host: str) -> None:
    """One line per build of the host: the preflight checks that fail or cannot tell on all data (the table
    is `gonka-evidence preflight --host HOST`; each epoch report has it for its epoch)."""
    from pipeline.evidence import compute
    from pipeline.evidence.provenance import command_line

    say(
        summaries.preflight(
            compute("preflight", con, host=host, command=command_line("preflight", "--host", host)).rows
        )
    )


def say(said: summaries.Said) -> None:
    """Lines of a job summary (pipeline/output/summaries.py) to the run's log, warnings included: the job's log
    is its output (cron and systemd keep stdout)."""
    for level, text in said:
        events.say(summaries.log_line(level, text))


def source_summary(con: duckdb.DuckDBPyConnection, summary: object, kind: str, source: dict) -> summaries.Said:
    """What the run's log says of one source's ingest, by the kind of its summary."""
    from pipeline.ingest.copies import other_builds_line
    from pipeline.ingest.json_responses import JsonIngestSummary
    from pipeline.ingest.logs import LogIngestSummary

    if isinstance(summary, LogIngestSummary):
        return summaries.log_source(summary, kind, source["path"])
    if isinstance(summary, JsonIngestSummary):
        return summaries.json_source(summary, source["path"])
    assert isinstance(summary, IngestSummary)
    return summaries.ingest(summary, verbose=events.verbose(), other_builds=other_builds_line(con, summary.source_id))


def report_inputs(
    con: duckdb.DuckDBPyConnection, cfg: RunConfig, data: dict[str, str], warehouse_arg: str | None
) -> str:
    """A digest of everything a report is built from: the data (`content_parts` without the reports'
    own table), the data clock, the host, the finality lag, the warehouse named in its commands and
    the pipeline version. A report built from equal inputs says the same."""
    from pipeline.core.version import pipeline_version

    clock = con.execute("SELECT max(copy_at) FROM ingest_runs WHERE status = 'ok'").fetchall()[0][0]
    facts = [
        _digest({k: v for k, v in data.items() if k not in (REPORTS_TABLE, STAMPS_PART)}),
        str(clock),
        cfg.host or "",
        str(cfg.finality_lag_delta.total_seconds()),
        warehouse_arg or "",
        pipeline_version(),
    ]
    return hashlib.sha256("\0".join(facts).encode()).hexdigest()


def write_due_reports(
    con: duckdb.DuckDBPyConnection, cfg: RunConfig, outcome: RunOutcome, data: dict[str, str]
) -> None:
    """Reports of epochs closed since the last report; the newest closed one again if its content
    changed, which is only looked at when its inputs (`report_inputs`; `data`: the warehouse's
    `content_parts` now) differ from those it was last built from."""
    from pipeline.output.guards.roles import claim_output_dir
    from pipeline.output.report import build_epoch_report, epoch_closure, fingerprint, write_epoch_report
    from pipeline.output.report.index import headline

    assert cfg.host is not None  # reports are written only for a configured host
    lag = cfg.finality_lag_delta
    outcome.closure = epoch_closure(con, lag).with_columns((pl.col("last_settled_at") + lag).alias("closes_by_lag_at"))
    closed = outcome.closure.filter(pl.col("closed_at").is_not_null())
    if closed.height == 0:
        return
    # A host with no slot in the escrows would get empty reports every epoch: refused (no report is written).
    cfg.host = str(check_value(con, "slot_host", cfg.host, cfg.named("host")))
    done = {
        r["epoch_id"]: r
        for r in fetch_frame(con, f"SELECT * FROM {REPORTS_TABLE} WHERE host = $host", {"host": cfg.host}).iter_rows(
            named=True
        )
    }
    newest = closed["epoch_id"].max()
    warehouse_arg = None if cfg.warehouse == DEFAULT_WAREHOUSE else str(cfg.warehouse)
    inputs = report_inputs(con, cfg, data, warehouse_arg)
    for row in closed.iter_rows(named=True):
        epoch = row["epoch_id"]
        previous = done.get(epoch)
        on_disk = previous is not None and (Path(previous["report_dir"]) / "report.md").exists()
        if previous is not None and on_disk and (epoch != newest or previous["inputs"] == inputs):
            continue
        report = build_epoch_report(
            con, epoch, cfg.host, finality_lag=cfg.finality_lag_delta, warehouse_arg=warehouse_arg
        )
        stamp = fingerprint(report)
        if previous is not None and on_disk and previous["fingerprint"] == stamp:
            with transaction(con):  # the same report from other inputs: the next run need not build it again
                con.execute(
                    f"UPDATE {REPORTS_TABLE} SET inputs = $inputs WHERE host = $host AND epoch_id = $epoch",
                    {"inputs": inputs, "host": cfg.host, "epoch": epoch},
                )
            continue
        try:
            claim_output_dir(cfg.output)
            path = write_epoch_report(report, cfg.output)
        except OSError as exc:
            raise RunError(
                f"{cfg.output / f'epoch-{epoch}'}: cannot write the report ({exc.strerror or exc}); {NOTHING_REPLACED}"
            ) from None
        with transaction(con):
            con.execute(
                "INSERT INTO epoch_reports_t (host, epoch_id, closed_at, closed_by, report_dir, fingerprint, "
                "written_at, rewrites, inputs, headline) VALUES ($host, $epoch, $closed_at, $closed_by, $dir, $fp, "
                "now(), 0, $inputs, $headline) ON CONFLICT (host, epoch_id) DO UPDATE SET closed_at = "
                "excluded.closed_at, closed_by = excluded.closed_by, report_dir = excluded.report_dir, fingerprint = "
                "excluded.fingerprint, written_at = excluded.written_at, rewrites = epoch_reports_t.rewrites + 1, "
                "inputs = excluded.inputs, headline = excluded.headline",
                {
                    "host": cfg.host,
                    "epoch": epoch,
                    "closed_at": row["closed_at"],
                    "closed_by": row["closed_by"],
                    "dir": str(path.resolve()),
                    "fp": stamp,
                    "inputs": inputs,
                    "headline": json.dumps(headline(report)),
                },
            )
        (outcome.rewritten if previous is not None else outcome.written).append(epoch)


def write_index_if_due(con: duckdb.DuckDBPyConnection, cfg: RunConfig, outcome: RunOutcome) -> None:
    """OUTPUT/index.html and index.md across the host's closed epochs, from the reports' stored headlines;
    rebuilt only when an epoch report was written or rewritten (or the index is missing). A report written
    before headlines were stored gets its headline from its report model once."""
    from pipeline.output.guards.roles import claim_output_dir
    from pipeline.output.report import build_epoch_report
    from pipeline.output.report.index import headline, write_index

    assert cfg.host is not None
    rows = fetch_frame(
        con, f"SELECT epoch_id, headline FROM {REPORTS_TABLE} WHERE host = $host ORDER BY epoch_id", {"host": cfg.host}
    )
    missing = [e for e, h in rows.iter_rows() if h is None]
    if not rows.height or not (
        outcome.written or outcome.rewritten or missing or not (cfg.output / "index.md").exists()
    ):
        return
    warehouse_arg = None if cfg.warehouse == DEFAULT_WAREHOUSE else str(cfg.warehouse)
    stored = dict(rows.iter_rows())
    for epoch in missing:
        report = build_epoch_report(
            con, epoch, cfg.host, finality_lag=cfg.finality_lag_delta, warehouse_arg=warehouse_arg
        )
        stored[epoch] = json.dumps(headline(report))
        with transaction(con):
            con.execute(
                f"UPDATE {REPORTS_TABLE} SET headline = $h WHERE host = $host AND epoch_id = $epoch",
                {"h": stored[epoch], "host": cfg.host, "epoch": epoch},
            )
    try:
        claim_output_dir(cfg.output)
        path = write_index(cfg.host, [json.loads(h) for h in stored.values()], cfg.output)
    except OSError as exc:
        raise RunError(f"{cfg.output / 'index.html'}: cannot write the index ({exc.strerror or exc})") from None
    outcome.index = path


def _print_outcome(outcome: RunOutcome, cfg: RunConfig) -> None:
    """The end of the run's summary: reports written or refreshed, epochs still open, the warehouse."""
    closing = open_epoch_lines(outcome.closure, cfg.finality_lag) if outcome.closure is not None else []
    say(summaries.run_outcome(outcome, output=cfg.output, host=cfg.host, open_epochs=closing))


def open_epoch_lines(closure: pl.DataFrame, finality_lag: str) -> list[str]:
    """One line per epoch that is still open: why, and when it closes under the finality lag.

    ``closure`` is the named query ``closed_epochs`` with ``closes_by_lag_at`` (last settlement +
    lag) added: an epoch closes when all its escrows settle, or once the data clock (the newest
    copy time) reaches its last settlement + lag; a later settlement moves that time on."""
    open_epochs = closure.filter(pl.col("closed_at").is_null())
    if open_epochs.height == 0:
        return ["open epochs: none"]
    lines = []
    for e in open_epochs.iter_rows(named=True):
        head = f"open: epoch {e['epoch_id']} ({e['escrows_settled']:,} of {e['escrows']:,} escrows settled"
        if e["last_settled_at"] is None:
            lines.append(
                f"{head}): no escrow settled yet; closes when all settle, or {finality_lag} after the last settlement"
            )
            continue
        clock = iso_utc(e["data_clock"]) if e["data_clock"] is not None else "none"
        lines.append(
            f"{head}, last at {iso_utc(e['last_settled_at'])}): closes when all escrows settle, or at "
            f"{iso_utc(e['closes_by_lag_at'])} (finality_lag {finality_lag}) if none settles before; data clock {clock}"
        )
    return lines


def _check_samples_warehouse(settings: Settings) -> None:
    """Without a config file the run ingests the bundled samples and reports on their host: only into a new
    warehouse or the samples' own, never into one that holds other sources (a job started in the wrong
    directory)."""
    if settings.config is not None or settings.host or not settings.warehouse.exists():
        return
    from pipeline.jobs.settings import WHERE_HOST, is_samples_warehouse
    from pipeline.warehouse.database import disk_errors, open_sandboxed

    with disk_errors(settings.warehouse):
        con = open_sandboxed(settings.warehouse)
    try:
        own = is_samples_warehouse(con)
    finally:
        con.close()
    if not own:
        raise RunError(
            f"{settings.warehouse}: no config file here and this warehouse is not the bundled samples'; "
            f"give --config FILE (gonka-evidence init writes one), or {WHERE_HOST}"
        )


def run_logged(settings: Settings, listener: events.Listener | None) -> RunOutcome:
    """The `run` task: `run_job`, its log lines said to `listener.line` as they happen and kept in
    `RunOutcome.log`; `listener.progress` gives the progress callback of each store ingest."""
    log: list[str] = []
    given = listener or events.Listener()

    def line(message: str) -> None:
        log.append(message)
        given.line(message)

    with events.listening(replace(given, line=line)):
        outcome = run_job(settings.config, settings.warehouse, settings)
    outcome.log = log
    return outcome
