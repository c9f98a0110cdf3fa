"""Network lake benchmark: N hosts' copies of one scale network, lake stage on 1 and 2 workers against
the sequential single-host ingest of the same copies.

    python bench/scale_copy.py --sizes 120000          # the network (gonka_bench_120000)
    python bench/network_bench.py --size 120000 --hosts 12 [--workers 1,2] [--buckets 16]
    python bench/scale_copy.py --sizes 120000 --layout sqlite   # no PostgreSQL server: bench/data/gonka_bench_120000/
    python bench/network_bench.py --size 120000 --hosts 12 --layout sqlite   # -> network-120000-sqlite.json

Each host's copy is a PostgreSQL database made from the network's by template, keeping only the escrows
in which the host holds a slot (as a host's own session storage does), for the hosts holding most
escrows. Measured: the sequential `gonka-evidence ingest` of every copy into one warehouse (wall time,
peak RSS), and `network ingest` of the same copies on a LocalCluster of 1 and 2 workers (wall time per
stage, bytes before and after dedupe, peak RSS per worker). Results: bench/results/network-<size>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
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


def host_copies_sqlite(data: Path, size: str, hosts: int) -> list[tuple[str, str, int]]:
    """(host, store directory, escrows) as `host_copies`, from the network's SQLite store
    (`bench/scale_copy.py --layout sqlite`): each a copy of its files without the other escrows' rows."""
    base = data / f"gonka_bench_{size}"
    if not (base / "_meta.db").exists():
        raise SystemExit(f"{base}: no SQLite copy (python bench/scale_copy.py --sizes {size} --layout sqlite)")
    rows: list[tuple[str, str]] = []
    for file in sorted(base.glob("epoch_*.db")):
        with closing(sqlite3.connect(file)) as con:
            rows += con.execute("SELECT escrow_id, group_json FROM sessions").fetchall()
    chosen, held = _most_escrows(rows, hosts)
    copies = []
    for i, host in enumerate(chosen):
        target = data / f"gonka_bench_net_{size}" / f"host-{i}"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(base, target)
        for file in sorted(target.glob("*.db")):
            with closing(sqlite3.connect(file)) as con:
                con.execute("CREATE TEMP TABLE keep (escrow_id TEXT PRIMARY KEY)")
                con.executemany("INSERT INTO temp.keep VALUES (?)", [(e,) for e in sorted(held[host])])
                for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
                    if "escrow_id" in {c[1] for c in con.execute(f'PRAGMA table_info("{table}")')}:
                        con.execute(f'DELETE FROM "{table}" WHERE escrow_id NOT IN (SELECT escrow_id FROM temp.keep)')
                con.commit()
                con.execute("VACUUM")
        copies.append((host, str(target), len(held[host])))
    return copies


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


def sequential_ingest(copies: list[str], work: Path) -> dict:
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
    }


def lake_ingest(copies: list[str], work: Path, workers: int, buckets: int) -> dict:
    from pipeline.network.cluster import dask_client
    from pipeline.network.jobs import network_ingest

    lake = work / f"lake-{workers}"
    marks: dict[str, float] = {}

    def progress(name: str, done: int, total: int) -> None:
        if done:
            marks[name] = time.monotonic()

    # The command's own LocalCluster (worker environment, preload), started before the clock starts.
    with dask_client(workers=workers) as client:
        scheduler = client.scheduler_info()["address"]
        started = time.monotonic()
        summary = network_ingest(copies, lake, scheduler=scheduler, buckets=buckets, progress=progress)
        peaks = client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    stage1 = marks["copies into the lake"] - started
    raw = sum(p.stat().st_size for t in ("sessions", "diffs") for p in (lake / t).rglob("*.parquet"))
    return {
        "workers": workers,
        "seconds": round(summary.elapsed_s, 1),
        "stage1_s": round(stage1, 1),
        "stage2_s": round(summary.elapsed_s - stage1, 1),
        "partitions": len(summary.partitions),
        "copies_bytes_read": sum(c.bytes_read for c in summary.copies),
        "diffs_before": summary.total("diffs_before"),
        "diffs_after": summary.total("diffs_after"),
        "diff_bytes_before": summary.total("bytes_before"),
        "diff_bytes_after": summary.total("bytes_after"),
        "lake_raw_mib": round(raw / 2**20),
        "lake_mib": round(sum(p.stat().st_size for p in lake.rglob("*") if p.is_file()) / 2**20),
        "peak_rss_mib_per_worker": sorted(round(v / 1024) for v in peaks.values()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="120000")
    parser.add_argument("--hosts", type=int, default=12)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--buckets", type=int, default=16)
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--layout", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--data", type=Path, default=DATA, help="--layout sqlite: where gonka_bench_<size>/ lies")
    args = parser.parse_args(argv)
    if args.layout == "sqlite":
        made = host_copies_sqlite(args.data, args.size, args.hosts)
    else:
        made = host_copies(args.url, args.size, args.hosts)
    copies = [u for _, u, _ in made]
    result: dict = {
        "size": args.size,
        "layout": args.layout,
        "hosts": args.hosts,
        "escrows_per_copy": [n for _, _, n in made],
    }
    result["loadavg_1m_start"] = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="gonka-net-bench-") as tmp:
        work = Path(tmp)
        result["sequential"] = sequential_ingest(copies, work)
        result["lake"] = [lake_ingest(copies, work, int(w), args.buckets) for w in args.workers.split(",")]
        shutil.rmtree(work, ignore_errors=True)
    result["loadavg_1m_end"] = os.getloadavg()[0]
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = f"network-{args.size}" + ("-sqlite" if args.layout == "sqlite" else "")
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
