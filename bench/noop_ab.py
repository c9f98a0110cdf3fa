"""Interleaved A/B of the no-op `gonka-evidence ingest` of the 1M copy: two (or more) source trees of
the pipeline, run alternately (the order flips every round) so that a shared machine's load falls on
every side alike; CPU seconds from the child's rusage. See bench/BENCHMARKS.md (the no-op re-ingest).

    python bench/noop_ab.py ROUNDS NAME=SOURCE_TREE ... [--output FILE]

Each side runs `from pipeline.cli.main import main; main()` from a script file (what the console script
does) with PYTHONPATH=SOURCE_TREE, e.g. an export of main (`git worktree add --detach /tmp/base main`)
against this tree. The warehouse is bench/data/warehouse_1m.duckdb (already ingested: a no-op).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
URL = "postgresql://postgres@127.0.0.1:5432/gonka_bench_1m"


def main() -> int:
    args = sys.argv[1:]
    output = None
    if "--output" in args:
        i = args.index("--output")
        output, args = args[i + 1], args[:i] + args[i + 2 :]
    rounds, sides = int(args[0]), [a.split("=", 1) for a in args[1:]]
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as script:
        script.write("from pipeline.cli.main import main\nmain()\n")
    command = [sys.executable, script.name, "ingest", URL, "--warehouse", str(ROOT / "bench/data/warehouse_1m.duckdb")]
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in sides}
    try:
        for r in range(rounds):
            for name, tree in sides if r % 2 == 0 else sides[::-1]:
                started = time.perf_counter()
                proc = subprocess.Popen(
                    command,
                    env={**os.environ, "PYTHONPATH": tree},
                    cwd=ROOT,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                _, status, usage = os.wait4(proc.pid, 0)
                if status:
                    raise SystemExit(f"{name}: exit status {status}")
                runs[name].append((time.perf_counter() - started, usage.ru_utime + usage.ru_stime))
    finally:
        os.unlink(script.name)
    summary = {
        name: {
            "cpu_median_s": statistics.median(c for _, c in v),
            "cpu_min_s": min(c for _, c in v),
            "wall_median_s": statistics.median(w for w, _ in v),
            "runs": v,
        }
        for name, v in runs.items()
    }
    for name, s in summary.items():
        print(
            f"{name}: CPU median {s['cpu_median_s']:.3f} s (min {s['cpu_min_s']:.3f}), "
            f"wall median {s['wall_median_s']:.3f} s"
        )
    print(f"load average {os.getloadavg()}")
    if output:
        Path(output).write_text(
            json.dumps(
                {"rounds": rounds, "sides": dict(sides), "loadavg_after": os.getloadavg(), "results": summary}, indent=2
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
