"""Network lake benchmark: N hosts' copies of one scale network, lake stage on several worker counts
against the sequential single-host ingest of the same copies.

    python bench/scale_copy.py --sizes 120000          # the network (gonka_bench_120000)
    python bench/network_bench.py --size 120000 --hosts 12 [--workers 1,2] [--buckets 16]
    python bench/scale_copy.py --sizes 120000 --layout sqlite   # no PostgreSQL server: bench/data/gonka_bench_120000/
    python bench/network_bench.py --size 120000 --hosts 12 --layout sqlite   # -> network-120000-sqlite.json
    # the worker sweep, SQLite copies made here from the generator (--make), no PostgreSQL:
    python bench/network_bench.py --size 1m --hosts 16 --workers 1,2,4,8,16 --buckets 64 --layout sqlite --make

Each host's copy is a PostgreSQL database made from the network's by template (or a copy of the SQLite
store's files), keeping only the escrows in which the host holds a slot (as a host's own session storage
does), for the hosts holding most escrows. Measured: the sequential `gonka-evidence ingest` of every copy
into one warehouse (wall time, peak RSS; `--no-sequential` skips it), and `network ingest` of the same
copies on a LocalCluster of each worker count, each into a fresh lake (wall time per stage, stage-1 tasks,
bytes before and after dedupe, peak RSS per worker), with speedup and efficiency against the first worker
count, and a digest of the evidence tables (executors, concentration, peer-invalidation of the first host)
of each lake, which must be the same for every worker count and equal the sequential warehouse's (exit 1
otherwise). `--append` adds the worker counts of this run to the results file of the same network and
settings (a sweep in parts: `--workers 1,2 --make`, then `--workers 4,8,16 --reuse --append`).
`--piece-rows N` sets GONKA_EVIDENCE_NETWORK_PIECE_ROWS (stage 1's diffs per task; a huge N reads every
copy whole). Each lake run also records, per task function (stage 1's `write_piece`, stage 2's
`build_partition`), the tasks' compute seconds from Dask's task stream, and the CPU seconds the
workers spent. Results:
bench/results/network-<size>[-sqlite].json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from contextlib import closing
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.scale_copy import DATA, DEFAULT_URL, db_url  # noqa: E402

RESULTS = ROOT / "bench" / "results"


def _most_escrows(rows: list[tuple[str, str]], hosts: int) -> tuple[list[str], dict[str, set[str]]]:
    """The `hosts` addresses holding a slot in most escrows, and every address's escrows."""
    held: dict[str, set[str]] = {}
    for escrow, group in rows:
        for slot in json.loads(group):
            held.setdefault(slot["ValidatorAddress"], set()).add(escrow)
    return sorted(held, key=lambda a: (-len(held[a]), a))[:hosts], held


def host_copies_sqlite(data: Path, size: str, hosts: int, reuse: bool = False) -> list[tuple[str, str, int]]:
    """(host, store directory, escrows) as `host_copies`, from the network's SQLite store
    (`bench/scale_copy.py --layout sqlite`): each a copy of its files without the other escrows' rows, made
    in parallel (with `reuse`, the copies made before for the same hosts are kept)."""
    base = data / f"gonka_bench_{size}"
    if not (base / "_meta.db").exists():
        raise SystemExit(f"{base}: no SQLite copy (python bench/scale_copy.py --sizes {size} --layout sqlite)")
    rows: list[tuple[str, str]] = []
    for file in sorted(base.glob("epoch_*.db")):
        with closing(sqlite3.connect(file)) as con:
            rows += con.execute("SELECT escrow_id, group_json FROM sessions").fetchall()
    chosen, held = _most_escrows(rows, hosts)
    targets = [data / f"gonka_bench_net_{size}" / f"host-{i}" for i in range(len(chosen))]
    made = data / f"gonka_bench_net_{size}" / "made.json"  # the hosts the copies were made for
    wanted = [[host, sorted(held[host])] for host in chosen]
    if not (reuse and made.exists() and json.loads(made.read_text()) == wanted):
        made.unlink(missing_ok=True)
        with ProcessPoolExecutor(max(1, min(len(chosen), os.cpu_count() or 1))) as pool:
            list(pool.map(_host_copy_sqlite, [base] * len(chosen), targets, [held[h] for h in chosen]))
        made.write_text(json.dumps(wanted))
    return [(host, str(target), len(held[host])) for host, target in zip(chosen, targets, strict=True)]


def _host_copy_sqlite(base: Path, target: Path, keep: set[str]) -> None:
    """A copy of the store's files without the rows of escrows other than `keep`."""
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(base, target)
    for file in sorted(target.glob("*.db")):
        with closing(sqlite3.connect(file)) as con:
            con.execute("CREATE TEMP TABLE keep (escrow_id TEXT PRIMARY KEY)")
            con.executemany("INSERT INTO temp.keep VALUES (?)", [(e,) for e in sorted(keep)])
            for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
                if "escrow_id" in {c[1] for c in con.execute(f'PRAGMA table_info("{table}")')}:
                    con.execute(f'DELETE FROM "{table}" WHERE escrow_id NOT IN (SELECT escrow_id FROM temp.keep)')
            con.commit()
            con.execute("VACUUM")


def host_copies(url: str, size: str, hosts: int) -> list[tuple[str, str, int]]:
    """(host, database URL, escrows) of the `hosts` hosts holding most escrows, each copy re-made."""
    import psycopg

    base = f"gonka_bench_{size}"
    with psycopg.connect(db_url(url, base)) as con:
        rows = con.execute("SELECT escrow_id, group_json FROM devshard_sessions").fetchall()
        tables = [
            r[0]
            for r in con.execute(
                "SELECT c.table_name FROM information_schema.columns c JOIN pg_class p ON p.relname = c.table_name "
                "WHERE c.column_name = 'escrow_id' AND c.table_schema = 'public' AND NOT p.relispartition "
                "AND p.relkind IN ('r', 'p')"
            ).fetchall()
        ]
    chosen, held = _most_escrows(rows, hosts)
    copies = []
    with psycopg.connect(db_url(url, "postgres"), autocommit=True) as admin:
        for i, host in enumerate(chosen):
            name = f"gonka_bench_net_{size}_{i}"
            admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
            admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{base}"')
            with psycopg.connect(db_url(url, name), autocommit=True) as con:
                keep = sorted(held[host])
                for table in tables:
                    con.execute(f'DELETE FROM "{table}" WHERE NOT (escrow_id = ANY(%s))', (keep,))
                con.execute("VACUUM ANALYZE")
            copies.append((host, db_url(url, name), len(held[host])))
    return copies


def sequential_ingest(copies: list[str], work: Path, host: str) -> dict:
    """Every copy into one warehouse with `gonka-evidence ingest`, one after another (subprocesses)."""
    warehouse = work / "single.duckdb"
    exe = str(Path(sys.executable).parent / "gonka-evidence")
    started = time.monotonic()
    for copy in copies:
        subprocess.run([exe, "ingest", copy, "--warehouse", str(warehouse), "-q"], check=True)
    return {
        "seconds": round(time.monotonic() - started, 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024),
        "warehouse_mib": round(warehouse.stat().st_size / 2**20),
        "evidence": warehouse_evidence(warehouse, host),
    }


def _plain(value):
    """`value` with NaN as None (NaN != NaN), tuples as lists: what a digest of equal tables may rely on."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return None if isinstance(value, float) and math.isnan(value) else value


def _digest(results: list) -> str:
    text = json.dumps(
        [{"rows": _plain(r.rows.to_dicts()), "stats": _plain(r.stats), "notes": r.notes} for r in results],
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def lake_evidence(lake: Path, host: str) -> str:
    """The digest of the lake's evidence tables (executors, concentration, peer-invalidation of `host`)."""
    from pipeline.network.jobs import network_evidence

    return _digest(
        [
            network_evidence("executors", lake, workers=0),
            network_evidence("concentration", lake, workers=0),
            network_evidence("peer-invalidation", lake, host=host, workers=0),
        ]
    )


def warehouse_evidence(warehouse: Path, host: str) -> str:
    """The same tables from the sequential warehouse: the same partial and reduce on the whole of it."""
    from pipeline.evidence.tables.peer_invalidation import peer_invalidation
    from pipeline.evidence.window import Window
    from pipeline.network.tables import NETWORK_TABLES, NetworkParams
    from pipeline.warehouse.database import open_read_only

    con = open_read_only(warehouse)
    try:
        params = NetworkParams(Window())
        results = [
            NETWORK_TABLES[name].reduce([NETWORK_TABLES[name].partial(con, params)], params)
            for name in ("executors", "concentration")
        ]
        results.append(peer_invalidation(con, host, Window()))
    finally:
        con.close()
    return _digest(results)


def _cpu_seconds() -> float:
    """CPU seconds of this worker process and its children (run on each worker)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _task_seconds(stream: list[dict]) -> dict[str, dict]:
    """Per task function (Dask's task stream): how many ran, their compute seconds summed, each one's
    seconds longest first (where a stage's time beyond task-seconds / workers goes)."""
    from dask.utils import key_split

    spent: dict[str, list[float]] = {}
    for task in stream:
        seconds = sum(s["stop"] - s["start"] for s in task["startstops"] if s["action"] == "compute")
        spent.setdefault(key_split(task["key"]), []).append(seconds)
    return {
        name: {"tasks": len(v), "seconds": round(sum(v), 2), "each_s": [round(x, 2) for x in sorted(v, reverse=True)]}
        for name, v in spent.items()
    }


def lake_ingest(copies: list[str], work: Path, workers: int, buckets: int, host: str) -> dict:
    from distributed import get_task_stream

    from pipeline.network.cluster import dask_client
    from pipeline.network.jobs import STAGE1, network_ingest

    lake = work / f"lake-{workers}"  # a fresh lake per worker count
    marks: dict[str, float] = {}
    tasks: dict[str, int] = {}

    def progress(name: str, done: int, total: int) -> None:
        if done:
            marks[name] = time.monotonic()
        tasks[name] = tasks.get(name, 0) + total

    # The command's own LocalCluster (worker environment, preload), started before the clock starts.
    with dask_client(workers=workers) as client, get_task_stream(client) as stream:
        scheduler = client.scheduler_info()["address"]
        cpu_before = client.run(_cpu_seconds)
        started = time.monotonic()
        summary = network_ingest(copies, lake, scheduler=scheduler, buckets=buckets, progress=progress)
        cpu_after = client.run(_cpu_seconds)
        peaks = client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    stage1 = marks[STAGE1] - started
    raw = sum(p.stat().st_size for t in ("sessions", "diffs") for p in (lake / t).rglob("*.parquet"))
    result = {
        "workers": workers,
        "seconds": round(summary.elapsed_s, 1),
        "stage1_s": round(stage1, 1),
        "weigh_s": round(marks["copies weighed"] - started, 2) if "copies weighed" in marks else None,
        "stage2_s": round(summary.elapsed_s - stage1, 1),
        "stage1_tasks": tasks.get(STAGE1, 0),
        "partitions": len(summary.partitions),
        "copies_bytes_read": sum(c.bytes_read for c in summary.copies),
        "diffs_before": summary.total("diffs_before"),
        "diffs_after": summary.total("diffs_after"),
        "diff_bytes_before": summary.total("bytes_before"),
        "diff_bytes_after": summary.total("bytes_after"),
        "lake_raw_mib": round(raw / 2**20),
        "lake_mib": round(sum(p.stat().st_size for p in lake.rglob("*") if p.is_file()) / 2**20),
        "peak_rss_mib_per_worker": sorted(round(v / 1024) for v in peaks.values()),
        "task_seconds": _task_seconds(stream.data),
        "workers_cpu_s": round(sum(cpu_after[w] - cpu_before[w] for w in cpu_after), 1),
        "evidence": lake_evidence(lake, host),
    }
    shutil.rmtree(lake, ignore_errors=True)  # the next worker count starts from nothing, and disk is kept
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="120000")
    parser.add_argument("--hosts", type=int, default=12)
    parser.add_argument("--workers", default="1,2", help="worker counts, comma-separated: each a fresh lake")
    parser.add_argument("--buckets", type=int, default=16)
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--layout", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--data", type=Path, default=DATA, help="--layout sqlite: where gonka_bench_<size>/ lies")
    parser.add_argument(
        "--make", action="store_true", help="--layout sqlite: generate gonka_bench_<size>/ first when it is missing"
    )
    parser.add_argument(
        "--reuse", action="store_true", help="--layout sqlite: keep the host copies made before for the same hosts"
    )
    parser.add_argument("--no-sequential", action="store_true", help="skip the sequential single-warehouse ingest")
    parser.add_argument("--piece-rows", type=int, help="GONKA_EVIDENCE_NETWORK_PIECE_ROWS for the lake runs")
    parser.add_argument(
        "--append",
        action="store_true",
        help="add these worker counts to the results file of the same network and settings (a sweep in parts)",
    )
    parser.add_argument("--out", type=Path, help="the results file (default bench/results/network-SIZE.json)")
    args = parser.parse_args(argv)
    if args.piece_rows is not None:
        os.environ["GONKA_EVIDENCE_NETWORK_PIECE_ROWS"] = str(args.piece_rows)
    if args.layout == "sqlite":
        if args.make and not (args.data / f"gonka_bench_{args.size}" / "_meta.db").exists():
            from bench.scale_copy import generate_sqlite

            generate_sqlite(args.size, args.data, workers=max(2, os.cpu_count() or 2))
        made = host_copies_sqlite(args.data, args.size, args.hosts, reuse=args.reuse)
    else:
        made = host_copies(args.url, args.size, args.hosts)
    copies = [u for _, u, _ in made]
    host = made[0][0]
    result: dict = {
        "size": args.size,
        "layout": args.layout,
        "hosts": args.hosts,
        "buckets": args.buckets,
        "piece_rows": args.piece_rows,
        "cores": os.cpu_count(),
        "escrows_per_copy": [n for _, _, n in made],
    }
    result["loadavg_1m_start"] = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="gonka-net-bench-") as tmp:
        work = Path(tmp)
        if not args.no_sequential:
            result["sequential"] = sequential_ingest(copies, work, host)
        result["lake"] = []
        for w in args.workers.split(","):
            result["lake"].append(lake_ingest(copies, work, int(w), args.buckets, host))
            print(json.dumps(result["lake"][-1]), flush=True)
        shutil.rmtree(work, ignore_errors=True)
    result["loadavg_1m_end"] = os.getloadavg()[0]
    name = f"network-{args.size}" + ("-sqlite" if args.layout == "sqlite" else "")
    out = args.out or RESULTS / f"{name}.json"
    settings = ("size", "layout", "hosts", "buckets", "piece_rows", "escrows_per_copy")
    if args.append and out.exists():
        before = json.loads(out.read_text())
        if any(before.get(k) != result[k] for k in settings):
            raise SystemExit(f"{out}: made with other settings ({', '.join(settings)}); not appended to")
        ran = {run["workers"] for run in result["lake"]}
        result["lake"] = sorted(
            [run for run in before["lake"] if run["workers"] not in ran] + result["lake"], key=lambda r: r["workers"]
        )
        if "sequential" not in result and "sequential" in before:
            result["sequential"] = before["sequential"]
    base = result["lake"][0]
    for run in result["lake"]:
        run["speedup"] = round(base["seconds"] / run["seconds"], 2)
        run["efficiency"] = round(base["seconds"] * base["workers"] / (run["seconds"] * run["workers"]), 2)
    digests = {run["evidence"] for run in result["lake"]}
    result["evidence_equal_across_workers"] = len(digests) == 1
    if "sequential" in result:
        result["evidence_equals_sequential"] = digests == {result["sequential"]["evidence"]}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    print("\nworkers  wall s  stage 1 s  stage 2 s  stage-1 tasks  speedup  efficiency  evidence")
    for run in result["lake"]:
        print(
            f"{run['workers']:>7}  {run['seconds']:>6}  {run['stage1_s']:>9}  {run['stage2_s']:>9}  "
            f"{run['stage1_tasks']:>13}  {run['speedup']:>7}  {run['efficiency']:>10}  {run['evidence']}"
        )
    print(f"evidence equal across worker counts: {result['evidence_equal_across_workers']}", end="")
    if "sequential" in result:
        print(f"; equal to the sequential warehouse: {result['evidence_equals_sequential']}", end="")
    print()
    return 0 if result["evidence_equal_across_workers"] and result.get("evidence_equals_sequential", True) else 1


if __name__ == "__main__":
    sys.exit(main())
