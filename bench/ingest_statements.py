"""Where a full ingest's DuckDB time goes: every statement timed, by the SQL file it comes from.

    python bench/ingest_statements.py [--size 500k] [--output FILE]     # PYTHONPATH=TREE for another tree

One `ingest_store` of `gonka_bench_<size>` (bench/run.py makes it) into a fresh warehouse, through a
connection whose `execute` is timed: wall and process CPU per statement (process CPU includes DuckDB's
threads), grouped by the `sql/` file whose text the statement is (`*`: contains it), else its first line.
Prints the ingest's wall, CPU and peak RSS and the statements by CPU; `--output` writes them as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any


def _labels() -> dict[str, str]:
    from pipeline.core.paths import SQL_DIR

    return {p.read_text().strip(): str(p.relative_to(SQL_DIR)) for p in SQL_DIR.rglob("*.sql")}


class TimedConnection:
    """A DuckDB connection whose `execute` adds its wall and CPU seconds to `stats` under the statement's label."""

    def __init__(self, con: Any, stats: dict[str, list[float]], labels: dict[str, str]) -> None:
        self._con, self._stats, self._labels = con, stats, labels

    def _label(self, sql: str) -> str:
        text = sql.strip()
        if text in self._labels:
            return self._labels[text]
        return next((f"{name}*" for body, name in self._labels.items() if body and body in text), text.split("\n")[0])

    def execute(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        wall, cpu = time.perf_counter(), time.process_time()
        result = self._con.execute(sql, *args, **kwargs)
        entry = self._stats[self._label(sql)]
        entry[0] += 1
        entry[1] += time.perf_counter() - wall
        entry[2] += time.process_time() - cpu
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="500k")
    parser.add_argument("--output")
    args = parser.parse_args()
    from pipeline.ingest.store import ingest_store
    from pipeline.sources.store import open_store
    from pipeline.warehouse.database import open_for_write

    server = os.environ.get("GONKA_BENCH_PG", "postgresql://postgres@127.0.0.1:5432")
    stats: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    with tempfile.TemporaryDirectory() as tmp:
        con, store = open_for_write(Path(tmp) / "w.duckdb"), open_store(f"{server}/gonka_bench_{args.size}")
        wall, cpu = time.perf_counter(), time.process_time()
        ingest_store(TimedConnection(con, stats, _labels()), store)  # type: ignore[arg-type]
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        store.close()
        con.close()
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    report = {
        "size": args.size,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "workers_cpu_s": round(kids.ru_utime + kids.ru_stime, 2),
        "peak_rss_mib": round(me.ru_maxrss / 1024),
        "loadavg_1m": os.getloadavg()[0],
        "statements": {
            label: {"calls": int(n), "wall_s": round(w, 3), "cpu_s": round(c, 3)}
            for label, (n, w, c) in sorted(stats.items(), key=lambda kv: -kv[1][2])
        },
    }
    print(
        f"ingest {wall:.2f} s, CPU {cpu:.2f} s + workers {report['workers_cpu_s']} s, peak {report['peak_rss_mib']} MiB"
    )
    for label, s in list(report["statements"].items())[:20]:
        print(f"{s['cpu_s']:7.2f} s CPU {s['wall_s']:7.2f} s wall {s['calls']:4d}x  {label}")
    if args.output:
        Path(args.output).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
