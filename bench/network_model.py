"""Scheduling model of the network lake's worker sweep, from task times measured on this machine.

    python bench/network_model.py        # = --size 250000 --hosts 16 --buckets 64 --model-size 1m

Measures the lake ingest (`network_ingest`) of SQLite host copies (`network_bench.host_copies_sqlite`,
the network made when missing) on a LocalCluster of 1 and of 2 workers, both with the same `--piece-rows`
so that both runs have the same tasks, then of 1 worker with every copy whole (its default cut). Every
task's time comes from Dask's task stream, its stage from its key (plan_copy: the weighing round,
write_piece: stage 1, build_partition: stage 2) and its size from its arguments (a piece's weight in
diffs; a partition's Parquet bytes). Fits time = overhead + rate x size per stage on the 1-worker runs
(least squares, overhead >= 0, with R²), and takes the median ratio of the same task's time at 2 workers
to 1 (the slowdown of a task under a second worker). Then forces the worker's thread pools (Polars,
Arrow, DuckDB) to 2 against 1 and times one stage-2 task on a 1-worker cluster, with what the worker
reports for its pools. `--measured FILE` models a results file again without measuring.

The model: the `--model-size` network with `--hosts` hosts (escrows and their hosts from the generator's
`plan_escrows`, the hosts holding most escrows as network_bench chooses them), its copies cut as
`network_ingest` cuts them for N worker slots (`cut_copy`), its partitions' bytes at the measured
bytes per copy diff row; each stage list-scheduled (a free worker takes the next task, largest first,
with the measured dispatch gap per task and the first task's extra time per worker), stages separated by
their barrier, plus the weighing round and the measured time outside the stages. Prints the predicted
wall, stages, speedup, efficiency and the bound max(largest task, work / N) for each worker count, and
the efficiency at the largest count if every task were slower by the measured 2-worker factor or by
`--old-slowdown`. Results: bench/results/network_model_<date>.json.
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "bench" / "results"
# What a results file keeps of the measurement (`--measured` models it again).
MEASURED = ("date", "size", "hosts", "buckets", "piece_rows", "cores", "loadavg_1m_start", "loadavg_1m_end")
MEASURED += ("runs", "threads")
STAGES = ("plan_copy", "write_piece", "build_partition")  # task key prefixes: weighing, stage 1, stage 2
# Sized to the worker's share in each worker (pipeline/core/resources.py worker_env: one thread at one worker
# per core); the thread run forces them to 2.
THREAD_VARS = ("POLARS_MAX_THREADS", "OMP_NUM_THREADS", "ARROW_IO_THREADS", "GONKA_EVIDENCE_THREADS")


# -- the simulator (pure) ---------------------------------------------------------------------------


def largest_first(sizes: Sequence[float]) -> list[int]:
    """The order `run_tasks` submits in: largest first, equal sizes in their given order."""
    return sorted(range(len(sizes)), key=lambda i: -sizes[i])


def list_schedule(durations: Sequence[float], workers: int, gap: float = 0.0, first: float = 0.0) -> float:
    """The makespan of `durations` run in the given order, each task taken by the first worker free (the
    lowest-numbered among equals); each task costs `gap` more (dispatch), a worker's first task `first` more."""
    if not durations:
        return 0.0
    free = [(0.0, w, True) for w in range(workers)]  # (free at, worker, has run nothing)
    heapq.heapify(free)
    end = 0.0
    for d in durations:
        at, w, fresh = heapq.heappop(free)
        done = at + gap + d + (first if fresh else 0.0)
        end = max(end, done)
        heapq.heappush(free, (done, w, False))
    return end


def bound(durations: Sequence[float], workers: int) -> float:
    """No schedule ends sooner: max(largest task, total work / workers)."""
    return max(max(durations, default=0.0), sum(durations) / workers)


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> dict:
    """Least squares y = overhead + rate x with overhead >= 0 (a task costs no less than nothing: where the
    free fit's overhead is negative, the fit through the origin): overhead, rate, R² and the points."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    rate = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    overhead = my - rate * mx
    if overhead < 0:
        overhead, rate = 0.0, sum(x * y for x, y in zip(xs, ys, strict=True)) / sum(x * x for x in xs)
    total = sum((y - my) ** 2 for y in ys)
    residual = sum((y - overhead - rate * x) ** 2 for x, y in zip(xs, ys, strict=True))
    return {"overhead_s": overhead, "rate_s_per_unit": rate, "r2": 1 - residual / total if total else 1.0, "n": n}


def predict_time(fit: dict, size: float) -> float:
    return max(0.0, fit["overhead_s"] + fit["rate_s_per_unit"] * size)


def piece_weights(copies: Sequence[Sequence[tuple[str, int]]], slots: int, piece_rows: int | None = None) -> list[int]:
    """The stage-1 tasks' weights (diffs) as network_ingest's `_pieces` cuts `copies` (each its escrows with
    their diffs, in the store's order) for `slots` worker slots: whole copies at one slot, else pieces of
    `jobs.piece_size` (or `piece_rows`)."""
    from pipeline.network.copies import CopyPlan, cut_copy
    from pipeline.network.jobs import piece_size

    plans = [CopyPlan(f"copy-{i}", list(escrows)) for i, escrows in enumerate(copies)]
    if piece_rows is None and slots < 2:
        return [plan.weight for plan in plans]
    if piece_rows is None:
        piece_rows = piece_size(sum(plan.weight for plan in plans), slots)
    return [p.weight for plan in plans for p in cut_copy(plan, math.ceil(plan.weight / piece_rows), "model")]


def simulate(model: dict, network: dict, workers: int, slowdown: float = 1.0, piece_rows: int | None = None) -> dict:
    """One worker count: the weighing round (none at one slot unless `piece_rows` is set), stage 1 (pieces,
    largest first), stage 2 (partitions, largest first), each list-scheduled and ended by its barrier, plus
    the time outside them. `slowdown` multiplies every task's time."""
    gap, first = model["dispatch_gap_s"], model["first_task_extra_s"]
    weights = piece_weights(network["copies"], workers, piece_rows)
    weighed = workers > 1 or piece_rows is not None
    s1 = [predict_time(model["fits"]["write_piece"], w) * slowdown for w in sorted(weights, reverse=True)]
    s2 = [
        predict_time(model["fits"]["build_partition"], b) * slowdown for b in sorted(network["partition_bytes"])[::-1]
    ]
    weigh = 0.0
    if weighed:
        plan = sorted(predict_time(model["fits"]["plan_copy"], sum(n for _, n in c)) for c in network["copies"])
        weigh = list_schedule(plan[::-1], workers, gap, first) * slowdown
    stage1 = list_schedule(s1, workers, gap, 0.0 if weighed else first)
    stage2 = list_schedule(s2, workers, gap)
    return {
        "workers": workers,
        "stage1_tasks": len(s1),
        "weigh_s": weigh,
        "stage1_s": stage1,
        "stage2_s": stage2,
        "wall_s": model["outside_s"] + weigh + stage1 + stage2,
        "bound_s": model["outside_s"] + weigh + bound(s1, workers) + bound(s2, workers),
        "largest_task_s": max(s1 + s2),
        "work_s": sum(s1) + sum(s2),
    }


def sweep(model: dict, network: dict, counts: Sequence[int], slowdown: float = 1.0) -> list[dict]:
    """`simulate` for each worker count, with speedup and efficiency against the first count run at full
    speed (`slowdown` applies to the counts above one worker: the slowdown of tasks under load)."""
    base = simulate(model, network, counts[0])
    rows = [simulate(model, network, n, slowdown if n > 1 else 1.0) for n in counts]
    for row in rows:
        row["speedup"] = base["wall_s"] / row["wall_s"]
        row["efficiency"] = base["wall_s"] * base["workers"] / (row["wall_s"] * row["workers"])
    return rows


def slowdown_for(model: dict, network: dict, counts: Sequence[int], efficiency: float) -> float:
    """The task slowdown at the last worker count that leaves it `efficiency` against the first (bisection)."""
    low, high = 1.0, 10.0
    if sweep(model, network, [counts[0], counts[-1]])[-1]["efficiency"] < efficiency:
        return 1.0
    for _ in range(40):
        mid = (low + high) / 2
        if sweep(model, network, [counts[0], counts[-1]], mid)[-1]["efficiency"] >= efficiency:
            low = mid
        else:
            high = mid
    return low


# -- the network at the model's size ----------------------------------------------------------------


def model_network(size: str, hosts: int, buckets: int, diffs_per_inference: float, bytes_per_row: float) -> dict:
    """The `size` network's `hosts` copies (each its escrows with their diffs, in escrow-id order) and its
    partitions' Parquet bytes (copy diff rows x `bytes_per_row`), from the generator's escrow plans."""
    from bench.network_bench import _most_escrows
    from bench.scale_copy import SIZES, plan_escrows
    from pipeline.network.lake import bucket_of

    plans, _, _ = plan_escrows(SIZES.get(size) or int(size), 1)
    rows = [(p["escrow_id"], json.dumps([{"ValidatorAddress": s} for s in p["slots"]])) for p in plans]
    chosen, held = _most_escrows(rows, hosts)
    diffs = {p["escrow_id"]: round(p["inferences"] * diffs_per_inference) for p in plans}
    epoch = {p["escrow_id"]: p["epoch_id"] for p in plans}
    copies = [[(e, diffs[e]) for e in sorted(held[h])] for h in chosen]
    rows_of: dict[tuple[int, int], int] = {}
    for copy in copies:
        for e, n in copy:
            key = (epoch[e], bucket_of(e, buckets))
            rows_of[key] = rows_of.get(key, 0) + n
    return {
        "size": size,
        "hosts": chosen,
        "copies": copies,
        "copy_diff_rows": sum(rows_of.values()),
        "partition_bytes": [n * bytes_per_row for n in rows_of.values()],
    }


# -- measurement ------------------------------------------------------------------------------------


class _Args:
    """A scheduler plugin (the LocalCluster's scheduler runs in this process) keeping each task's arguments
    by key, which the task stream does not carry."""

    def __init__(self, scheduler):
        from distributed.diagnostics.plugin import SchedulerPlugin

        seen: dict[str, tuple] = {}

        class Plugin(SchedulerPlugin):
            def transition(self, key, start, finish, *args, **kwargs):
                ts = scheduler.tasks.get(key)
                if ts is not None and key not in seen and hasattr(ts.run_spec, "args"):
                    seen[str(key)] = tuple(ts.run_spec.args)

        self.seen = seen
        scheduler.add_plugin(Plugin(), name="network-model-args")


def _cluster_run(
    copies: list[str], weights: dict[str, int], lake: Path, workers: int, buckets: int, piece_rows: int | None
) -> dict:
    """One lake ingest on a fresh LocalCluster of `workers`: every task (stage, size, seconds, worker)."""
    from distributed import get_task_stream

    from pipeline.network.cluster import dask_client
    from pipeline.network.jobs import network_ingest

    t0 = time.monotonic()
    with dask_client(workers=workers) as client:
        start_s = time.monotonic() - t0
        args = _Args(client.cluster.scheduler)
        started = time.monotonic()
        with get_task_stream(client=client) as stream:
            summary = network_ingest(
                copies, lake, scheduler=client.scheduler_info()["address"], buckets=buckets, piece_rows=piece_rows
            )
        wall = time.monotonic() - started
        records = list(stream.data)
    bytes_of = {(p.epoch, p.bucket): p.bytes_read for p in summary.partitions}
    tasks = []
    for rec in records:
        key = str(rec["key"])
        stage = key.rsplit("-", 5)[0]
        if stage not in STAGES:
            continue
        compute = [s for s in rec["startstops"] if s["action"] == "compute"]
        a = args.seen.get(key, ())
        task = {"stage": stage, "worker": rec["worker"], "start": compute[0]["start"], "stop": compute[-1]["stop"]}
        if stage == "plan_copy":
            task["id"] = a[0]
        elif stage == "write_piece":
            task["id"], task["size"] = f"{a[1]}#{a[2].index}/{a[2].count}", a[2].weight or weights[a[1]]
        else:
            task["id"], task["size"] = f"{a[1]}/{a[2]}", bytes_of[(a[1], a[2])]
        task["seconds"] = task["stop"] - task["start"]
        tasks.append(task)
    for t in tasks:
        if t["stage"] == "plan_copy":  # a weighed copy's size: its diffs
            t["size"] = weights[t["id"]]
    origin = min(t["start"] for t in tasks)
    span = {s: max(t["stop"] for t in tasks if t["stage"] == s) - min(t["start"] for t in tasks if t["stage"] == s)
            for s in STAGES if any(t["stage"] == s for t in tasks)}  # fmt: skip
    for t in tasks:
        t["start"], t["stop"] = round(t["start"] - origin, 4), round(t["stop"] - origin, 4)
        t["seconds"] = round(t["seconds"], 4)
    return {
        "workers": workers,
        "piece_rows": piece_rows,
        "cluster_start_s": round(start_s, 2),
        "wall_s": round(wall, 2),
        "span_s": {s: round(v, 2) for s, v in span.items()},
        "outside_s": round(wall - sum(span.values()), 2),
        "copy_diff_rows": summary.total("diffs_before"),
        "partition_bytes": sum(bytes_of.values()),
        "tasks": sorted(tasks, key=lambda t: t["start"]),
    }


def _gaps(run: dict) -> list[float]:
    """On each worker, the time from one task's end to the next one's start (dispatch), within a stage."""
    out = []
    by_worker: dict[str, list[dict]] = {}
    for t in run["tasks"]:
        by_worker.setdefault(t["worker"], []).append(t)
    for tasks in by_worker.values():
        for a, b in zip(tasks, tasks[1:], strict=False):
            if a["stage"] == b["stage"]:
                out.append(b["start"] - a["stop"])
    return out


def _pools() -> dict:
    """What a worker's thread pools are: Polars', Arrow's CPU and I/O pools, and the DuckDB threads the
    pipeline gives its connections (and the `threads` setting of one such connection)."""
    import duckdb
    import polars
    import pyarrow

    from pipeline.core.resources import duckdb_threads

    con = duckdb.connect(config={"threads": duckdb_threads()})
    try:
        setting = con.execute("SELECT current_setting('threads')").fetchone()[0]
    finally:
        con.close()
    return {
        "polars": polars.thread_pool_size(),
        "arrow_cpu": pyarrow.cpu_count(),
        "arrow_io": pyarrow.io_thread_count(),
        "duckdb": int(setting),
    }


def _timed_build(root: str, epoch: int, bucket: int) -> float:
    from pipeline.network.partition import build_partition

    t = time.perf_counter()
    build_partition(root, epoch, bucket, True)
    return time.perf_counter() - t


def threads_run(lake: Path, partition: tuple[int, int], rounds: int) -> list[dict]:
    """The largest partition's stage-2 task rebuilt on a 1-worker cluster whose pools are forced to 1 and
    to 2 threads (alternating): its time, and what the worker reports for its pools."""
    from pipeline.network.cluster import dask_client

    out = []
    saved = {v: os.environ.get(v) for v in THREAD_VARS}
    try:
        for _ in range(rounds):
            for threads in (1, 2):
                os.environ.update(dict.fromkeys(THREAD_VARS, str(threads)))
                with dask_client(workers=1) as client:
                    pools = next(iter(client.run(_pools).values()))
                    seconds = client.submit(_timed_build, str(lake.resolve()), *partition, pure=False).result()
                out.append({"threads": threads, "pools": pools, "seconds": round(seconds, 3)})
    finally:
        for v, value in saved.items():
            if value is None:
                os.environ.pop(v, None)
            else:
                os.environ[v] = value
    return out


def measured_model(runs: list[dict]) -> dict:
    """The fits (the 1-worker runs: in pieces and with every copy whole), the 2-worker slowdown of the same
    tasks (the runs in pieces), the dispatch gap, the first task's extra time per worker and the time
    outside the stages."""
    one, two = runs[0], runs[1]
    fits = {}
    for stage in STAGES:
        tasks = [t for run in runs if run["workers"] == 1 for t in run["tasks"] if t["stage"] == stage]
        fits[stage] = fit_line([t["size"] for t in tasks], [t["seconds"] for t in tasks])
    slowdown = {}
    for stage in STAGES:
        a = {t["id"]: t["seconds"] for t in one["tasks"] if t["stage"] == stage}
        b = {t["id"]: t["seconds"] for t in two["tasks"] if t["stage"] == stage}
        ratios = [b[k] / a[k] for k in a.keys() & b.keys() if a[k] > 0]
        slowdown[stage] = statistics.median(ratios) if ratios else None
    # a worker's first stage-1 task against the fit: what a fresh worker pays once
    extra = []
    for run in runs:
        firsts: dict[str, dict] = {}
        for t in run["tasks"]:
            firsts.setdefault(t["worker"], t)
        for t in firsts.values():
            if t["stage"] == "write_piece":
                extra.append(t["seconds"] - predict_time(fits["write_piece"], t["size"]))
            elif t["stage"] == "plan_copy":
                extra.append(t["seconds"] - predict_time(fits["plan_copy"], t["size"]))
    gaps = [g for run in runs for g in _gaps(run)]
    both = [x for s in ("write_piece", "build_partition") if (x := slowdown[s]) is not None]
    return {
        "fits": fits,
        "slowdown_2_vs_1": slowdown,
        "slowdown_tasks": statistics.median(both) if both else 1.0,
        "dispatch_gap_s": statistics.median(gaps) if gaps else 0.0,
        "first_task_extra_s": max(0.0, statistics.median(extra)) if extra else 0.0,
        "outside_s": statistics.median(run["outside_s"] for run in runs),
    }


# -- report -----------------------------------------------------------------------------------------


def table(rows: list[dict]) -> str:
    lines = [
        "| workers | stage-1 tasks | predicted wall s | weighing s | stage 1 s | stage 2 s | speedup | efficiency "
        "| bound s | largest task s | work s |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['workers']} | {r['stage1_tasks']} | {r['wall_s']:.1f} | {r['weigh_s']:.1f} | {r['stage1_s']:.1f} "
            f"| {r['stage2_s']:.1f} | {r['speedup']:.2f} | {r['efficiency']:.2f} | {r['bound_s']:.1f} "
            f"| {r['largest_task_s']:.2f} | {r['work_s']:.1f} |"
        )
    return "\n".join(lines)


def measure(args: argparse.Namespace, copies: list[str]) -> dict:
    """The 1- and 2-worker lake runs (every task), then the stage-2 task with its pools forced to 1 and 2."""
    from pipeline.network.copies import plan_copy

    weights = {c: plan_copy(c).weight for c in copies}  # a copy read whole: its task's size
    result: dict = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "size": args.size,
        "hosts": args.hosts,
        "buckets": args.buckets,
        "piece_rows": args.piece_rows,
        "cores": os.cpu_count(),
        "loadavg_1m_start": os.getloadavg()[0],
        "runs": [],
    }
    with tempfile.TemporaryDirectory(prefix="gonka-net-model-") as tmp:
        # 1 and 2 workers with the same pieces, then 1 worker with every copy whole (its default cut)
        for workers, piece_rows in ((1, args.piece_rows), (2, args.piece_rows), (1, None)):
            lake = Path(tmp) / f"lake-{workers}-{piece_rows}"
            run = _cluster_run(copies, weights, lake, workers, args.buckets, piece_rows)
            result["runs"].append(run)
            print(
                f"{workers} worker(s), piece rows {piece_rows}: wall {run['wall_s']} s, stages {run['span_s']}, "
                f"outside {run['outside_s']} s, "
                f"cluster start {run['cluster_start_s']} s, {len(run['tasks'])} tasks",
                flush=True,
            )
        largest = max(
            (t for t in result["runs"][0]["tasks"] if t["stage"] == "build_partition"), key=lambda t: t["size"]
        )
        if args.thread_rounds:
            epoch, bucket = (int(x) for x in largest["id"].split("/"))
            result["threads"] = threads_run(
                Path(tmp) / f"lake-2-{args.piece_rows}", (epoch, bucket), args.thread_rounds
            )
    result["loadavg_1m_end"] = os.getloadavg()[0]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="250000", help="the measured network")
    parser.add_argument("--hosts", type=int, default=16)
    parser.add_argument("--buckets", type=int, default=64)
    parser.add_argument("--piece-rows", type=int, default=30_000, help="stage 1's diffs per task in both runs")
    parser.add_argument("--model-size", default="1m", help="the network the sweep is predicted for")
    parser.add_argument("--model-workers", default="1,2,4,8,16")
    parser.add_argument("--old-slowdown", type=float, default=1.45, help="a task slowdown to show as well")
    parser.add_argument("--thread-rounds", type=int, default=2, help="rounds of the 1-vs-2-thread task (0: none)")
    parser.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "gonka-bench")
    parser.add_argument("--measured", type=Path, help="a results file: its runs modelled again, nothing measured")
    parser.add_argument("--out", type=Path, help="default bench/results/network_model_<date>.json")
    args = parser.parse_args(argv)
    from bench.network_bench import host_copies_sqlite

    if not (args.data / f"gonka_bench_{args.size}" / "_meta.db").exists():
        from bench.scale_copy import generate_sqlite

        generate_sqlite(args.size, args.data, workers=max(2, os.cpu_count() or 2))
    made = host_copies_sqlite(args.data, args.size, args.hosts, reuse=True)
    copies = [path for _, path, _ in made]
    out = args.out or RESULTS / f"network_model_{datetime.now(UTC):%Y-%m-%d}.json"
    if args.measured:  # the model again on runs measured before (same network and settings)
        before = json.loads(args.measured.read_text())
        result = {k: before[k] for k in MEASURED if k in before}
        for run in result["runs"]:  # a file of the first version: both runs cut at its piece rows
            run.setdefault("piece_rows", result["piece_rows"])
    else:
        result = measure(args, copies)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1) + "\n")  # the measurement kept, whatever follows
    one, two = result["runs"][:2]
    model = measured_model(result["runs"])
    result["model"] = model
    from bench.scale_copy import SIZES, plan_escrows
    from pipeline.network.copies import plan_copy

    # The generator's escrow plans against the copies' own weights: diffs per inference, and the bytes of
    # the lake's files per copy diff row (what a partition's bytes grow by).
    measured_plans = [plan_copy(c).escrows for c in copies]
    inferences = {p["escrow_id"]: p["inferences"] for p in plan_escrows(SIZES.get(args.size) or int(args.size), 1)[0]}
    model["diffs_per_inference"] = statistics.median(n / inferences[e] for plan in measured_plans for e, n in plan)
    model["bytes_per_copy_diff_row"] = one["partition_bytes"] / one["copy_diff_rows"]
    per_inference, per_row = model["diffs_per_inference"], model["bytes_per_copy_diff_row"]
    # The model on the measured network itself, with the runs' own cut: against the measured walls.
    check = model_network(args.size, args.hosts, args.buckets, per_inference, per_row)
    result["check"] = {
        "escrows_equal": [[e for e, _ in c] for c in check["copies"]] == [[e for e, _ in c] for c in measured_plans],
        "measured": [{k: run[k] for k in ("workers", "piece_rows", "wall_s", "span_s")} for run in result["runs"]],
        "predicted": [simulate(model, check, run["workers"], piece_rows=run["piece_rows"]) for run in result["runs"]],
        "predicted_slowed": simulate(model, check, 2, model["slowdown_tasks"], args.piece_rows),
    }
    counts = [int(n) for n in args.model_workers.split(",")]
    net = model_network(args.model_size, args.hosts, args.buckets, per_inference, per_row)
    result["model_network"] = {
        "size": args.model_size,
        "hosts": args.hosts,
        "copy_diffs": [sum(n for _, n in c) for c in net["copies"]],
        "copy_diff_rows": net["copy_diff_rows"],
        "partitions": len(net["partition_bytes"]),
        "partition_mib": [round(b / 2**20, 1) for b in sorted(net["partition_bytes"], reverse=True)],
    }
    result["predicted"] = sweep(model, net, counts)
    top = counts[-1]
    result["sensitivity"] = [
        {"slowdown": f, **sweep(model, net, [counts[0], top], f)[-1]}
        for f in (model["slowdown_tasks"], args.old_slowdown)
    ]
    result["slowdown_for_0.8"] = slowdown_for(model, net, counts, 0.8)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(report(result))
    print(f"results: {out}")
    return 0


def report(result: dict) -> str:
    """The measured fits and slowdowns, the model's check on the measured runs, the predicted sweep."""
    m = result["model"]
    units = {"plan_copy": "copy diffs", "write_piece": "piece diffs", "build_partition": "partition bytes"}
    lines = [
        "",
        "| stage | tasks | overhead s | rate | R² | 2-worker slowdown (median, same tasks) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for stage, fit in m["fits"].items():
        unit = units[stage]
        scale, per = (1e6, "s per M " + unit.split()[1]) if stage != "build_partition" else (2**20, "s per MiB")
        slow = m["slowdown_2_vs_1"][stage]
        lines.append(
            f"| {stage} | {fit['n']} | {fit['overhead_s']:.3f} | {fit['rate_s_per_unit'] * scale:.3f} {per} "
            f"| {fit['r2']:.3f} | {'' if slow is None else f'{slow:.2f}'} |"
        )
    lines.append(
        f"\ndispatch gap {m['dispatch_gap_s']:.3f} s a task; first task's extra {m['first_task_extra_s']:.3f} s a "
        f"worker; outside the stages {m['outside_s']:.2f} s; {m['diffs_per_inference']:.4f} diffs per inference, "
        f"{m['bytes_per_copy_diff_row']:.0f} B per copy diff row"
    )
    for run in result["runs"]:
        lines.append(f"cluster start, {run['workers']} worker(s): {run['cluster_start_s']} s (not in the wall)")
    for run in result["runs"]:
        sizes = [t["size"] for t in run["tasks"] if t["stage"] == "write_piece"]
        lines.append(f"stage-1 tasks, {run['workers']} worker(s): {len(sizes)} of {min(sizes):,}–{max(sizes):,} diffs")
    for row in result.get("threads", []):
        lines.append(f"stage-2 task, pools forced to {row['threads']}: {row['seconds']} s, worker pools {row['pools']}")
    check = result["check"]
    lines.append(f"\ncheck on the measured network (each copy's escrows as modelled: {check['escrows_equal']}):")
    for meas, pred in zip(check["measured"], check["predicted"], strict=True):
        lines.append(
            f"  {meas['workers']} worker(s), piece rows {meas['piece_rows']}: measured wall {meas['wall_s']} s "
            f"{meas['span_s']}, predicted "
            f"{pred['wall_s']:.1f} s (weighing {pred['weigh_s']:.1f}, stage 1 {pred['stage1_s']:.1f}, "
            f"stage 2 {pred['stage2_s']:.1f})"
        )
    slowed = check["predicted_slowed"]
    lines.append(f"  2 workers, every task {m['slowdown_tasks']:.2f}x slower: predicted {slowed['wall_s']:.1f} s")
    net = result["model_network"]
    lines.append(
        f"\npredicted sweep, {net['size']} network, {len(net['copy_diffs'])} copies of {min(net['copy_diffs']):,}–"
        f"{max(net['copy_diffs']):,} diffs, {net['partitions']} partitions:\n"
    )
    lines.append(table(result["predicted"]))
    for s in result["sensitivity"]:
        lines.append(
            f"every task {s['slowdown']:.2f}x slower at {s['workers']} workers: wall {s['wall_s']:.1f} s, "
            f"efficiency {s['efficiency']:.2f}"
        )
    lines.append(
        f"efficiency 0.8 at {result['predicted'][-1]['workers']} workers holds up to tasks "
        f"{result['slowdown_for_0.8']:.2f}x slower"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
