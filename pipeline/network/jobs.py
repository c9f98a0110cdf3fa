"""The network jobs the facade calls: the lake ingest (stages 1 and 2) and a network evidence table."""

from __future__ import annotations

import contextlib
import math
import shutil
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.env import env_int
from pipeline.core.events import Progress
from pipeline.core.roles import Role, is_url
from pipeline.core.sqlnames import quote_string
from pipeline.core.version import pipeline_version
from pipeline.evidence.closure import DEFAULT_FINALITY_LAG, Closure, closure, mark
from pipeline.evidence.result import EvidenceResult, Provenance
from pipeline.evidence.window import EvidenceError, Window
from pipeline.network.cluster import dask_client, run_tasks, worker_memory
from pipeline.network.copies import CopyPiece, CopyWritten, PieceWritten, commit_copy, cut_copy, plan_copy, write_piece
from pipeline.network.lake import Lake, LakeError
from pipeline.network.partition import PartitionBuilt, build_partition
from pipeline.network.tables import NETWORK_TABLES, NetworkParams
from pipeline.output.evidence import Evidence
from pipeline.output.guards.roles import check_outputs, check_path
from pipeline.warehouse.held import held_description

# Stage 1 cuts a copy into pieces of about the network's diffs / (workers x PIECES_PER_WORKER), so that
# largest-first submission balances the workers; never below MIN_PIECE_ROWS, where a piece's own cost
# (opening the copy, a query per table and epoch) would show. PIECE_ROWS_ENV sets the size instead.
PIECES_PER_WORKER = 3
MIN_PIECE_ROWS = 20_000
PIECE_ROWS_ENV = "GONKA_EVIDENCE_NETWORK_PIECE_ROWS"
STAGE1 = "copy pieces into the lake"  # its progress counts tasks: a copy read whole is one piece


@dataclass
class NetworkIngestSummary:
    """What `network ingest` did."""

    lake: str
    buckets: int
    copies: list[CopyWritten] = field(default_factory=list)
    partitions: list[PartitionBuilt] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def built(self) -> int:
        return sum(not p.skipped for p in self.partitions)

    def total(self, name: str) -> int:
        return sum(getattr(p, name) for p in self.partitions)

    def fork_keys(self) -> list[dict]:
        """Every forked (escrow, nonce) of the lake's partitions, with the copies holding it."""
        return sorted(
            (key | {"epoch": p.epoch} for p in self.partitions for key in p.fork_keys),
            key=lambda k: (k["epoch"], k["escrow_id"], k["nonce"]),
        )


def _quiet(*_: object) -> None:
    return None


def network_ingest(
    copies: list[str],
    lake_dir: str | Path,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    buckets: int | None = None,
    memory_limit: str | None = None,
    piece_rows: int | None = None,
    progress: Progress | None = None,
) -> NetworkIngestSummary:
    """Stage 1 (each copy into the lake, a large one in pieces of about `piece_rows` diffs: `_pieces`),
    then stage 2 (each partition whose copies changed into its warehouse, one task per partition), on a
    Dask cluster. The lake is never a copy, inside one or holding one; then it is new, empty or a lake."""
    check_outputs({"lake": Path(lake_dir)}, inputs=[Path(c) for c in copies if not is_url(c)])
    check_path(Path(lake_dir), Role.LAKE_WRITE, "lake")
    started = time.monotonic()
    progress = progress or _quiet
    memory_limit = worker_memory(memory_limit)  # refused before the lake is made
    lake = Lake(lake_dir, buckets, create=True)
    root = str(lake.root.resolve())
    summary = NetworkIngestSummary(str(lake.root), lake.buckets)
    with lake.writer(), dask_client(workers, scheduler, memory_limit) as client:  # one writer at a time
        pieces = _pieces(client, copies, progress, piece_rows)
        written = run_tasks(
            client,
            write_piece,
            [(root, spec, piece) for _, spec, piece in pieces],
            STAGE1,
            progress,
            _bytes,
            sizes=[piece.weight for _, _, piece in pieces],
        )
        # Each copy's manifest once all of its pieces are in, in the order the copies were named.
        by_copy: dict[int, list[PieceWritten]] = {}
        for (i, _, _), piece_written in zip(pieces, written, strict=True):
            by_copy.setdefault(i, []).append(piece_written)
        _refuse_unrelated_copies(lake, list(by_copy.values()))  # before any copy's manifest switches to them
        summary.copies = [commit_copy(root, group) for group in by_copy.values()]
        # Largest first, so that the largest partition does not start last and end the stage alone; the
        # summary keeps (epoch, bucket) order.
        sizes = lake.partition_bytes()
        keys = lake.partitions()
        parts = [(root, e, b) for e, b in keys]
        summary.partitions = run_tasks(
            client, build_partition, parts, "partitions", progress, _bytes, sizes=[sizes.get(k, 0) for k in keys]
        )
        # Every task has ended: what is left in the temporary directory is a killed attempt's.
        shutil.rmtree(lake.tmp, ignore_errors=True)
    summary.elapsed_s = time.monotonic() - started
    return summary


def _refuse_unrelated_copies(lake: Lake, groups: list[list[PieceWritten]]) -> None:
    """An unrelated copy is not a fork: a copy of this run whose session for an escrow id names another
    creator, config or group than the lake's copies (or an earlier copy of this run) give it is refused
    before its manifest names its files. Then the files this run wrote are deleted: the lake is as it was."""
    from pipeline.ingest.identity import IDENTITY, identity_differs, unrelated_copy

    def identities(files: list[Path]) -> dict[str, dict[str, Any]]:
        frames = [pl.read_parquet(f, columns=["escrow_id", *IDENTITY]) for f in files]
        frames = [f for f in frames if f.height]
        if not frames:
            return {}
        rows = pl.concat(frames).group_by("escrow_id").agg(pl.col(c).drop_nulls().first() for c in IDENTITY)
        return {r["escrow_id"]: r for r in rows.iter_rows(named=True)}

    def sessions(paths: list[str]) -> list[Path]:
        return [lake.root / f for f in paths if f.startswith("sessions/")]

    new_ids = {group[0].manifest.copy_id for group in groups}
    held = identities(sessions([f for m in lake.manifests() if m.copy_id not in new_ids for f in m.files]))
    for group in groups:
        mine = identities(sessions([f for written in group for f in written.manifest.files]))
        clashes = sorted(
            (escrow, what)
            for escrow, row in mine.items()
            if escrow in held and (what := identity_differs(held[escrow], row))
        )
        if clashes:
            _discard_written(lake, groups)
            raise LakeError(
                unrelated_copy(
                    group[0].manifest.display, clashes, "the lake", "nothing was written to the lake (use another lake)"
                )
            )
        held.update({k: v for k, v in mine.items() if k not in held})


def _discard_written(lake: Lake, groups: list[list[PieceWritten]]) -> None:
    """Delete the files this run's stage 1 wrote (named by no manifest yet) and the folders it made for them."""
    for group in groups:
        for written in group:
            for f in written.manifest.files:
                path = lake.root / f
                path.unlink(missing_ok=True)
                with contextlib.suppress(OSError):  # its bucket= and epoch= folders, when it made them
                    path.parent.rmdir()
                    path.parent.parent.rmdir()
    shutil.rmtree(lake.tmp, ignore_errors=True)


def piece_size(total_diffs: int, slots: int) -> int:
    """Stage 1's default piece (diffs): the network's diffs over PIECES_PER_WORKER tasks per worker slot,
    at least MIN_PIECE_ROWS."""
    return max(MIN_PIECE_ROWS, math.ceil(total_diffs / (slots * PIECES_PER_WORKER)))


def _pieces(client, copies: list[str], progress: Progress, piece_rows: int | None) -> list[tuple[int, str, CopyPiece]]:
    """Stage 1's tasks: each copy whole, or cut into pieces of about `piece_rows` diffs (by default the
    network's diffs over PIECES_PER_WORKER tasks per worker, at least MIN_PIECE_ROWS), so that no copy
    is a task much longer than the others and workers beyond the number of copies have work."""
    piece_rows = piece_rows or env_int(PIECE_ROWS_ENV, 0, 1, 10**12, "diff rows") or None
    slots = sum(client.nthreads().values()) if client is not None else 1  # worker threads
    generation = uuid.uuid4().hex[:12]  # every piece of a run writes under one generation (a retry, the same)
    if piece_rows is None and slots < 2:  # one task at a time: pieces would only add their own cost
        return [(i, spec, CopyPiece(0, 1, generation)) for i, spec in enumerate(copies)]
    plans = run_tasks(client, plan_copy, [(spec,) for spec in copies], "copies weighed", progress)
    if piece_rows is None:
        piece_rows = piece_size(sum(plan.weight for plan in plans), slots)
    return [
        (i, plan.spec, piece)
        for i, plan in enumerate(plans)
        for piece in cut_copy(plan, math.ceil(plan.weight / piece_rows), generation)
    ]


def _bytes(result: PieceWritten | PartitionBuilt) -> int:
    if isinstance(result, PartitionBuilt):
        return 0 if result.skipped else result.bytes_read
    return result.manifest.bytes_read


def partition_partial(lake_root: str, epoch: int, bucket: int, name: str, params: NetworkParams) -> pl.DataFrame:
    """One partition's partial of a network table (a task): the table's SQL on its warehouse, read-only."""
    from pipeline.warehouse.database import open_read_only

    con = open_read_only(Lake(lake_root).warehouse_path(epoch, bucket))
    try:
        return NETWORK_TABLES[name].partial(con, params)
    finally:
        con.close()


def network_evidence(
    name: str,
    lake_dir: str | Path,
    *,
    host: str | None = None,
    epoch: int | None = None,
    control: str | None = None,
    by_escrow: bool = False,
    workers: int | None = None,
    scheduler: str | None = None,
    command: str = "",
    progress: Progress | None = None,
    allow_open: bool = False,
) -> EvidenceResult:
    """A network evidence table from the lake: partials on the cluster, the reduce here; marked closed or
    open like a warehouse's tables, a statistical test over an open epoch refused unless `allow_open`."""
    table = NETWORK_TABLES.get(name)
    if table is None:
        raise EvidenceError(f"unknown network evidence table {name!r}; choose one of {', '.join(NETWORK_TABLES)}")
    if table.needs_host and not host:
        raise EvidenceError(f"{name} needs --host ADDR (the host whose answers are compared)")
    lake = Lake(lake_dir)
    window = Window.parse(epoch)
    host, control = (_held_address(lake, option, value) for option, value in (("--host", host), ("--control", control)))
    held = lake.epochs()
    if epoch is not None and epoch not in held:
        raise EvidenceError(f"epoch {epoch} is not in the lake: it holds {held_description(held, None, None)}")
    partitions = [(e, b) for e, b in lake.partitions() if epoch is None or e == epoch]
    stale = [
        (e, b) for e, b in partitions if (lake.partition_info(e, b) or {}).get("fingerprint") != lake.fingerprint(e, b)
    ]
    if stale:
        raise LakeError(
            f"{lake.root}: {len(stale)} partition(s) not built from the copies now in the lake "
            "(run `gonka-evidence network ingest` again)"
        )
    state = _lake_closure(lake, window)
    params = NetworkParams(window, host.strip() if host else None, control.strip() if control else None, by_escrow)
    root = str(lake.root.resolve())
    frames: list[pl.DataFrame] = []
    if partitions:
        with dask_client(workers, scheduler) as client:
            frames = run_tasks(
                client,
                partition_partial,
                [(root, e, b, name, params) for e, b in partitions],
                "partitions",
                progress or _quiet,
            )
    result = mark(table.reduce([f for f in frames if f.height], params), state, window, allow_open=allow_open)
    result.provenance = lake_provenance(lake, window, command)
    return result


@contextmanager
def _lake_views(lake: Lake, views: tuple[str, ...]) -> Iterator[Any]:
    """A scratch DuckDB connection where each of `views` is the union of that view over every partition
    warehouse of the lake (attached read-only): the single-warehouse checks and rules run on it as is."""
    import duckdb

    paths = [p for e, b in lake.partitions() if (p := lake.warehouse_path(e, b)).exists()]
    con = duckdb.connect()
    try:
        for i, path in enumerate(paths):
            con.execute(f"ATTACH {quote_string(str(path))} AS p{i} (READ_ONLY)")
        for view in views:
            union = " UNION ALL ".join(f"SELECT * FROM p{i}.{view}" for i in range(len(paths)))
            con.execute(f"CREATE TEMP VIEW {view} AS {union or 'SELECT * FROM (SELECT 1) WHERE false'}")
        yield con
    finally:
        con.close()


def _held_address(lake: Lake, option: str, value: str | None) -> str | None:
    """`value` of `option` checked by `pipeline.warehouse.held.check_value` against the slot holders of every
    partition warehouse of the lake (a typo must not print an empty table with statistics)."""
    from pipeline.warehouse.held import UnheldValue, check_value

    if value is None:
        return None
    try:
        with _lake_views(lake, ("escrow_slots",)) as con:
            return str(check_value(con, "slot_host", value, option))
    except UnheldValue as exc:
        raise EvidenceError(str(exc).replace("the warehouse", "the lake")) from None


def _lake_closure(lake: Lake, window: Window) -> Closure:
    """The closed-epoch rule of a warehouse (pipeline/evidence/closure.py) over the lake's partitions."""
    if not lake.partitions():
        return Closure((), DEFAULT_FINALITY_LAG)
    with _lake_views(lake, ("escrows", "ingest_runs")) as con:
        return closure(con, window)


def network_table(name: str, lake_dir: str | Path, **options: Any) -> Evidence:
    """The `network evidence` task: `network_evidence` (same options) with its chart, where the table has one."""
    result = network_evidence(name, lake_dir, **options)
    chart = NETWORK_TABLES[name].chart
    return Evidence(result, chart=chart(result) if chart else None)


def lake_provenance(lake: Lake, window: Window, command: str) -> Provenance:
    """Every copy in the lake (label, copy time, input digest) and the rows quarantined in its partitions."""
    infos = [info for e, b in lake.partitions() if (info := lake.partition_info(e, b)) is not None]
    sources = []
    for m in lake.manifests():
        times = [info["copy_at"].get(m.copy_id) for info in infos]
        known = [datetime.fromisoformat(t) for t in times if t]
        sources.append(
            {
                "source_id": m.source_id,
                "source_kind": m.source_kind,
                "label": m.label,
                "copy_at": max(known) if known else None,
                "input_digest": m.input_digest,
            }
        )
    return Provenance(
        sources=sources,
        run_ids=[],
        window=window.as_dict(),
        quarantined_rows=sum(int(info.get("quarantined", 0)) for info in infos),
        command=command,
        pipeline_version=pipeline_version(),
    )


def lake_quarantine(lake_dir: str | Path) -> pl.DataFrame:
    """The quarantine rows of every partition warehouse (forks, disagreeing sealed rows, undecodable rows)."""
    from pipeline.warehouse.database import fetch_frame, open_read_only

    lake = Lake(lake_dir)
    frames = []
    for e, b in lake.partitions():
        path = lake.warehouse_path(e, b)
        if not path.exists():
            continue
        con = open_read_only(path)
        try:
            frames.append(
                fetch_frame(
                    con,
                    "SELECT $epoch::BIGINT AS epoch, $bucket::BIGINT AS bucket, source_id, table_name, row_key, reason "
                    "FROM quarantine ORDER BY ALL",
                    {"epoch": e, "bucket": b},
                )
            )
        finally:
            con.close()
    return pl.concat(frames) if frames else pl.DataFrame()
