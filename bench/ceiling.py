"""The machine's own ceiling on N-worker efficiency: one single-threaded task alone, then N copies at once.

    python bench/ceiling.py [--workers 16] [--rows 3000000] [--out FILE]

Each task is a process with one thread for DuckDB, Polars and Arrow (as a lake worker's share of one core),
doing what a lake task does in kind: DuckDB builds a table, groups, sorts and writes it to Parquet; Polars
reads it back, joins and groups. Timed alone (the median of 3) and as N processes started at once (each
one's seconds). The slowdown (median task at N over alone) bounds the efficiency of any perfectly split
work at 1 / slowdown: what is left below it is the machine (shared cores, caches, memory), not the code.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TASK = """
import os, sys, time
os.environ["POLARS_MAX_THREADS"] = "1"
import duckdb, polars as pl, pyarrow as pa
pa.set_cpu_count(1); pa.set_io_thread_count(1)
rows, path = int(sys.argv[1]), sys.argv[2]
t = time.perf_counter()
con = duckdb.connect(config={"threads": 1})
con.execute("SET enable_progress_bar = false")  # stdout carries the seconds only
con.execute(f"CREATE TABLE t AS SELECT i, hash(i) % 1000 AS k, hash(i * 7) AS v FROM range({rows}) r(i)")
con.execute(f"COPY (SELECT k, count(*) n, sum(v % 1000) s FROM t GROUP BY k ORDER BY k) TO '{path}.a.parquet'")
con.execute(f"COPY (SELECT * FROM t ORDER BY v) TO '{path}.b.parquet'")
b = pl.read_parquet(f"{path}.b.parquet")
a = pl.read_parquet(f"{path}.a.parquet")
out = b.join(a, on="k").group_by("k").agg(pl.col("v").max(), pl.len()).sort("k")
assert out.height == 1000
print(time.perf_counter() - t)
"""


def _run(n: int, rows: int, work: Path) -> list[float]:
    """`n` tasks started at once; each one's seconds."""
    command = [sys.executable, "-c", TASK, str(rows)]
    procs = [subprocess.Popen([*command, str(work / f"t{i}")], stdout=subprocess.PIPE, text=True) for i in range(n)]
    return [float(p.communicate()[0]) for p in procs]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        _run(1, args.rows, work)  # warm-up: imports and page cache
        alone = [_run(1, args.rows, work)[0] for _ in range(3)]
        started = time.perf_counter()
        together = _run(args.workers, args.rows, work)
        wall = time.perf_counter() - started
    slowdown = statistics.median(together) / statistics.median(alone)
    result = {
        "workers": args.workers,
        "rows": args.rows,
        "alone_s": alone,
        "together_s": sorted(together),
        "together_wall_s": wall,
        "slowdown": slowdown,
        "ceiling_efficiency": 1 / slowdown,
    }
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
