"""Interleaved A/B of the full ingest of a bench copy, with its read floor measured in the same sitting.

    python bench/ingest_ab.py ROUNDS NAME=SOURCE_TREE ... [--size 500k] [--output FILE]

Each round runs every side once (the order flips every round, so a shared machine's drift falls on
every side alike): `ingest_store` of `gonka_bench_<size>` (bench/run.py makes it) into a fresh warehouse,
in a child process with PYTHONPATH=SOURCE_TREE (an export of an older commit: `git worktree add --detach
/tmp/before COMMIT`). Per run: wall seconds inside `ingest_store`, CPU seconds of the ingesting process
and of its children (the decode workers), and the peak RSS of each (`ru_maxrss`: the ingesting process,
and its largest child). Each round also times the floor: binary COPY of every table the ingest reads
(bench/run.py `step_floor`, the flat tables and the diff blobs), so the report gives ingest / floor per
side. The median of the runs and the median of the pairs' ratios against the first side are printed.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

CHILD = """
import json, resource, sys, time
from pathlib import Path
from pipeline.ingest.store import ingest_store
from pipeline.sources.store import open_store
from pipeline.warehouse.database import open_for_write
url, path = sys.argv[1], Path(sys.argv[2])
for p in (path, path.with_name(path.name + ".wal")):
    p.unlink(missing_ok=True)
con, store = open_for_write(path), open_store(url)
started = time.perf_counter()
summary = ingest_store(con, store)
elapsed = time.perf_counter() - started
store.close()
con.close()
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({
    "elapsed_s": elapsed, "rows": sum(summary.rows.values()),
    "cpu_s": me.ru_utime + me.ru_stime, "children_cpu_s": kids.ru_utime + kids.ru_stime,
    "peak_rss_mib": me.ru_maxrss / 1024, "children_peak_rss_mib": kids.ru_maxrss / 1024,
}))
"""


def _floor(url: str) -> float:
    from run import step_floor

    floor = step_floor(url, "")
    return floor["elapsed_s"] + floor["blobs"]["elapsed_s"]


def main() -> int:
    args = sys.argv[1:]
    options = {"--size": "500k", "--output": None}
    for flag in list(options):
        if flag in args:
            i = args.index(flag)
            options[flag], args = args[i + 1], args[:i] + args[i + 2 :]
    rounds, sides = int(args[0]), [a.split("=", 1) for a in args[1:]]
    server = os.environ.get("GONKA_BENCH_PG", "postgresql://postgres@127.0.0.1:5432")
    url = f"{server}/gonka_bench_{options['--size']}"
    runs: dict[str, list[dict]] = {name: [] for name, _ in sides}
    floors: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "ingest.py"
        script.write_text(CHILD)
        _floor(url)  # warm-up: the page cache holds the copy for every side alike
        for r in range(rounds):
            floors.append(_floor(url))
            for name, tree in sides if r % 2 == 0 else sides[::-1]:
                out = subprocess.run(
                    [sys.executable, str(script), url, str(Path(tmp) / f"{name}.duckdb")],
                    env={**os.environ, "PYTHONPATH": tree},
                    # not the caller's directory: `python -m` puts the working directory first on a decode
                    # worker's sys.path, so a checkout there would be every side's decode
                    cwd=tmp,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(name, runs[name][-1], flush=True)
    floor = statistics.median(floors)
    first = sides[0][0]
    summary = {}
    for name, v in runs.items():
        wall = statistics.median(x["elapsed_s"] for x in v)
        summary[name] = {
            "wall_median_s": wall,
            "floor_over_ingest": floor / wall,
            "pair_ratio_median": statistics.median(
                a["elapsed_s"] / b["elapsed_s"] for a, b in zip(runs[first], v, strict=True)
            ),
            "cpu_median_s": statistics.median(x["cpu_s"] for x in v),
            "children_cpu_median_s": statistics.median(x["children_cpu_s"] for x in v),
            "peak_rss_mib_max": max(x["peak_rss_mib"] for x in v),
            "children_peak_rss_mib_max": max(x["children_peak_rss_mib"] for x in v),
            "runs": v,
        }
        s = summary[name]
        print(
            f"{name}: ingest median {wall:.2f} s (speed x{s['pair_ratio_median']:.2f} of {first}, median of the "
            f"pairs), floor {floor:.2f} s = {s['floor_over_ingest']:.3f} of the ingest; CPU {s['cpu_median_s']:.1f} s "
            f"+ workers {s['children_cpu_median_s']:.1f} s; peak RSS {s['peak_rss_mib_max']:.0f} MiB, "
            f"largest worker {s['children_peak_rss_mib_max']:.0f} MiB"
        )
    print(f"load average {os.getloadavg()}")
    if options["--output"]:
        Path(options["--output"]).write_text(
            json.dumps(
                {
                    "size": options["--size"],
                    "rounds": rounds,
                    "sides": dict(sides),
                    "floor_s": floors,
                    "results": summary,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
