"""Payload benchmark: MB/s of stored answers scanned and ingested, against a `json.loads` loop.

    python bench/payloads_bench.py [--sizes 100,300] [--regenerate] [--steps read,baseline,scanner,...] [--rounds 3]

Generates (into git-ignored bench/data/) a store directory holding only the payload plane,
`payloads_<MB>/payloads/{epoch}/{escrow}/{inference}.json` (base64 fields, as Go writes them),
with realistic bodies: mostly ~1,000-token answers with top-5 logprobs (numeric token-id
strings), half a single `chat.completion` JSON and half an SSE stream (`data: {chunk}` …
`data: [DONE]`, usage in the final chunk); some short and some long answers; a few planted
faults (a NaN literal, tokens named by text, a truncated stream, a body that is not JSON);
request bodies with mixed sampling parameters. `<MB>` is the response-body volume. The
smaller size is a hard-linked prefix (whole escrows, path order) of the larger, so both are
the same bodies in the same order, and both hold the largest bodies (3,200-token answers, one
SSE and one JSON, generated first): peak RSS at the two sizes is then comparable.

Every step runs in its own child process (peak RSS = `ru_maxrss` of that child via
`os.wait4`, as in bench/run.py); the scan steps read the bodies through `file_payloads`
(file read + base64 decode), untimed:

  read      `file_payloads` alone: file read + base64 decode (the I/O floor of the ingest)
  baseline  plain `json.loads` loop doing the same checks naively (per SSE chunk for streams):
            logprob entries, duplicate top_logprob tokens per position, NaN / missing
            logprobs, non-numeric tokens, usage.completion_tokens → MB/s of response bodies
  scanner   `pipeline.transforms.answer_scan.scan_response` over the same bodies
  row       `check_payload` (request + response + row dict) over the same payloads
  ingest_1  the registered payload plane ingester (`ingest_payloads`, from
            `pipeline.ingest.planes.PLANE_INGESTERS`) into a fresh DuckDB warehouse (schema creation
            untimed) with the default GONKA_EVIDENCE_WORKERS=1: read, check and DuckDB writes in
            one process
  ingest    the same with GONKA_EVIDENCE_WORKERS=2, the opt-in (files read, decoded and checked
            in the workers)
  paired    the baseline and ingest_1, alternated `--rounds` times in one process, so that both see
            the same machine load; the target (ingest >= 2x the json.loads loop) is evaluated on
            the ratio of their median wall times

CPU seconds are those of the timed part: this process's CPU time while timing plus all the CPU
time of the worker processes (the step stops multiprocessing's fork server, whose children the
workers are, and reads RUSAGE_CHILDREN); `step_cpu_s` in the JSON is the whole step's process tree. Peak RSS is the
largest single process (`ru_maxrss`) and, sampled every 50 ms from outside, the sum over the
step's process tree.

MB are 10^6 bytes of decoded response bodies. Results go to bench/results/payloads.json and
print as a table; the targets (paired ingest >= 2x the baseline, memory flat between sizes) are evaluated.
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import StepTimer

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
DATA = BENCH / "data"
RESULTS = BENCH / "results"
sys.path.insert(0, str(ROOT))

STEPS = ("read", "baseline", "scanner", "row", "ingest_1", "ingest", "paired")
TARGETS = {"ingest_vs_json_loads": 2.0, "rss_growth": 1.10}
ROUNDS = 3  # of the paired step (--rounds)
MODEL = "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8"
EPOCH0 = 430
ESCROWS_PER_EPOCH = 6
LONGEST = 3200  # completion tokens of the longest answers


# -- generation -----------------------------------------------------------------------------------


def _completion_tokens(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.80:  # the bulk: ~1,000-token answers
        return max(600, min(1500, int(rng.gauss(1000, 150))))
    if r < 0.95:
        return rng.randrange(20, 400)
    return rng.randrange(2000, LONGEST)


def _sampling(rng: random.Random) -> tuple[float | None, float | None]:
    r = rng.random()
    if r < 0.35:
        return 0.0, 1.0  # greedy, explicit
    if r < 0.50:
        return None, None  # API defaults
    return rng.choice((0.6, 0.7, 0.8, 1.0)), rng.choice((0.8, 0.9, 0.95, 1.0))


def _plant(rng: random.Random, body: bytes, stream: bool, i: int) -> tuple[bytes, str | None]:
    """~1.5% of bodies get a fault; the rest stay clean."""
    r = rng.random()
    if r < 0.006:  # NaN literal (not strict JSON: forces the scanner's stdlib fallback)
        return re.sub(rb'"logprob":-?[0-9.]+', b'"logprob":NaN', body, count=1), "nan"
    if r < 0.010:  # tokens named by text
        return re.sub(rb'"token":"(\d+)"', rb'"token":"w\1"', body), "text_tokens"
    if r < 0.013 and stream:  # stream cut mid-chunk
        return body[: len(body) // 2], "truncated"
    if r < 0.015 and not stream:
        return b"upstream error: " + body[:200], "not_json"
    return body, None


def generate(megabytes: int, seed: int = 4) -> dict:
    """The payload store `payloads_<megabytes>/` (response bodies totalling ~megabytes MB)."""
    from pipeline.samples.payloads import payload_file, request_body, response_body

    root = DATA / f"payloads_{megabytes}"
    shutil.rmtree(root, ignore_errors=True)
    rng = random.Random(seed)
    started = time.perf_counter()
    n = resp_bytes = req_bytes = file_bytes = 0
    faults: dict[str, int] = {}
    tokens = []
    epoch, escrow_ix, inference = EPOCH0, 0, 0
    per_escrow = 24
    while resp_bytes < megabytes * 1e6:
        escrow = str(epoch * 1000 + 100 + escrow_ix)
        inference += 1
        stream = rng.random() < 0.5
        ct = _completion_tokens(rng)
        if n < 2:  # the two largest bodies come first, so every size (a prefix) holds them: RSS is comparable
            stream, ct = n == 0, LONGEST
        temperature, top_p = _sampling(rng)
        req = request_body(rng, MODEL, max(ct, 1024), temperature, top_p, stream)
        resp = response_body(rng, MODEL, inference, 1_760_000_000 + n, rng.randrange(40, 900), ct, stream)
        resp, fault = _plant(rng, resp, stream, n)
        if fault:
            faults[fault] = faults.get(fault, 0) + 1
        d = root / "payloads" / str(epoch) / escrow
        d.mkdir(parents=True, exist_ok=True)
        data = payload_file(req, resp)
        (d / f"{inference}.json").write_bytes(data)
        n += 1
        tokens.append(ct)
        resp_bytes += len(resp)
        req_bytes += len(req)
        file_bytes += len(data)
        if inference >= per_escrow:
            inference, escrow_ix = 0, escrow_ix + 1
            if escrow_ix >= ESCROWS_PER_EPOCH:
                escrow_ix, epoch = 0, epoch + 1
    tokens.sort()
    info = {
        "megabytes": megabytes,
        "payloads": n,
        "response_bytes": resp_bytes,
        "request_bytes": req_bytes,
        "file_bytes": file_bytes,
        "epochs": epoch - EPOCH0 + (1 if escrow_ix or inference else 0),
        "completion_tokens_median": tokens[len(tokens) // 2],
        "completion_tokens_p95": tokens[int(len(tokens) * 0.95)],
        "faults": faults,
        "generated_s": time.perf_counter() - started,
        "seed": seed,
    }
    (root / "info.json").write_text(json.dumps(info))
    return info


def subset(large: int, small: int) -> dict:
    """`payloads_<small>/`: hard links to the first payloads of `payloads_<large>/` (path order)."""

    src, dst = DATA / f"payloads_{large}", DATA / f"payloads_{small}"
    shutil.rmtree(dst, ignore_errors=True)
    n = resp_bytes = file_bytes = 0
    done = False
    for epoch_dir in sorted((src / "payloads").iterdir(), key=lambda p: int(p.name)):
        for escrow_dir in sorted(epoch_dir.iterdir()):
            for path in sorted(escrow_dir.glob("*.json")):
                doc = json.loads(path.read_bytes())
                out = dst / "payloads" / epoch_dir.name / escrow_dir.name
                out.mkdir(parents=True, exist_ok=True)
                os.link(path, out / path.name)
                n += 1
                resp_bytes += len(base64.b64decode(doc["response_payload"]))
                file_bytes += path.stat().st_size
            if resp_bytes >= small * 1e6:  # whole escrows
                done = True
                break
        if done:
            break
    info = {
        "megabytes": small,
        "payloads": n,
        "response_bytes": resp_bytes,
        "file_bytes": file_bytes,
        "subset_of": f"payloads_{large}",
    }
    (dst / "info.json").write_text(json.dumps(info))
    return info


def ensure(sizes: list[int], regenerate: bool) -> dict:
    largest = max(sizes)
    infos = {}
    info_path = DATA / f"payloads_{largest}" / "info.json"
    if regenerate or not info_path.exists():
        print(f"generating payloads_{largest} …", flush=True)
        infos[largest] = generate(largest)
    else:
        infos[largest] = json.loads(info_path.read_text())
    for s in sizes:
        if s == largest:
            continue
        p = DATA / f"payloads_{s}" / "info.json"
        if regenerate or not p.exists() or json.loads(p.read_text()).get("subset_of") != f"payloads_{largest}":
            infos[s] = subset(largest, s)
        else:
            infos[s] = json.loads(p.read_text())
    return infos


# -- the naive baseline ---------------------------------------------------------------------------


def naive_checks(body: bytes) -> dict:
    """The same facts as scan_response, with the standard library and no tricks."""
    entries = dup = nan = missing = not_ids = chars = 0
    usage = {}

    def add(choice_logprobs):
        nonlocal entries, dup, nan, missing, not_ids
        for e in (choice_logprobs or {}).get("content") or []:
            entries += 1
            lp = e.get("logprob")
            if lp is None:
                missing += 1
            elif isinstance(lp, float) and math.isnan(lp):
                nan += 1
            tok = e.get("token")
            if not (isinstance(tok, str) and tok.isdigit()):
                not_ids += 1
            tops = [t.get("token") for t in e.get("top_logprobs") or []]
            if len(set(tops)) != len(tops):
                dup += 1

    text = body.decode()
    if text.lstrip().startswith("data:"):
        done = False
        for line in text.split("\n"):
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                done = True
                break
            chunk = json.loads(data)
            if chunk.get("usage"):
                usage = chunk["usage"]
            for choice in chunk.get("choices") or []:
                chars += len((choice.get("delta") or {}).get("content") or "")
                add(choice.get("logprobs"))
        if not done:
            raise ValueError("truncated")
    else:
        doc = json.loads(text)
        for choice in doc["choices"]:
            chars += len((choice.get("message") or {}).get("content") or "")
            add(choice.get("logprobs"))
        usage = doc.get("usage") or {}
    return {
        "completion_tokens": usage.get("completion_tokens"),
        "logprob_tokens": entries,
        "duplicate_top_logprob_positions": dup,
        "nan_logprobs": nan,
        "missing_logprobs": missing,
        "tokens_not_ids": not_ids,
        "empty": chars == 0 and entries == 0,
    }


# -- steps (child processes) ----------------------------------------------------------------------


def _payloads(size: int):
    from pipeline.sources.store.payloads import file_payloads

    return file_payloads(DATA / f"payloads_{size}" / "payloads", set())


def _add_facts(r, sums: dict) -> bool:
    """Add one body's facts to the totals; False when the body could not be read to the end."""
    if r is None or isinstance(r, Exception) or r.get("complete") is False:
        return False
    for k in sums:
        sums[k] += r.get(k) or 0
    return True


def _new_sums() -> dict:
    return {"logprob_tokens": 0, "duplicate_top_logprob_positions": 0, "nan_logprobs": 0, "tokens_not_ids": 0}


def _scan_step(size: int, fn, use_payload: bool = False) -> dict:
    scan_s, cpu_s, n, nbytes, errors, sums = 0.0, 0.0, 0, 0, 0, _new_sums()
    started = time.perf_counter()
    for p in _payloads(size):
        if p.response is None:
            continue
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            r = fn(p) if use_payload else fn(p.response)
        except ValueError:  # BodyError is a ValueError; json.JSONDecodeError too
            r = None
        scan_s += time.perf_counter() - t0
        cpu_s += time.process_time() - c0
        n += 1
        nbytes += len(p.response)
        errors += not _add_facts(r, sums)
    wall = time.perf_counter() - started
    return {
        "elapsed_s": scan_s,
        "cpu_s": cpu_s,
        "wall_s": wall,
        "bodies": n,
        "response_bytes": nbytes,
        "processes": 1,
        "mb_per_s": nbytes / 1e6 / scan_s,
        "unreadable": errors,
        "totals": sums,
    }


def step_read(size: int) -> dict:
    c0, started = time.process_time(), time.perf_counter()
    n = nbytes = req = 0
    for p in _payloads(size):
        n += 1
        nbytes += len(p.response or b"")
        req += len(p.prompt or b"")
    elapsed = time.perf_counter() - started
    return {
        "elapsed_s": elapsed,
        "cpu_s": time.process_time() - c0,
        "bodies": n,
        "response_bytes": nbytes,
        "request_bytes": req,
        "processes": 1,
        "mb_per_s": nbytes / 1e6 / elapsed,
    }


def step_baseline(size: int) -> dict:
    return _scan_step(size, naive_checks)


def step_scanner(size: int) -> dict:
    from pipeline.transforms.answer_scan import scan_response

    return _scan_step(size, scan_response)


def step_row(size: int) -> dict:
    from pipeline.transforms.answer_scan import check_payload

    return _scan_step(size, lambda p: check_payload(p)[0], use_payload=True)


class _PayloadOnlyStore:
    """What the payload ingester uses of a store: kind, path, source_id (a copy holding only payloads)."""

    kind = "sqlite"

    def __init__(self, path: Path):
        self.path = path
        self.display = str(path)
        self.source_id = f"sqlite:{path}"


def step_ingest_1(size: int) -> dict:
    os.environ["GONKA_EVIDENCE_WORKERS"] = "1"
    return _ingest(size)


def step_ingest(size: int) -> dict:
    os.environ["GONKA_EVIDENCE_WORKERS"] = "2"
    return _ingest(size)


def _ingest(size: int, timed: bool = True) -> dict:
    import pipeline.ingest.payloads as answers
    from pipeline.core.parallel import worker_count
    from pipeline.ingest.planes import PLANE_INGESTERS
    from pipeline.ingest.runs import IngestRun, ingest_run
    from pipeline.warehouse.database import open_for_write

    ingester = next(f for f in PLANE_INGESTERS if f.__name__ == "ingest_payloads")
    path = DATA / f"payloads_warehouse_{size}.duckdb"
    for p in (path, path.with_name(path.name + ".wal")):
        p.unlink(missing_ok=True)
    con = open_for_write(path)  # schema creation: not timed
    timers = {k: StepTimer() for k in ("read+check", "duckdb")}  # read+check: waiting for the checked rows
    if timed:  # the breakdown (once per process: the wrappers stay)
        answers.checked_payloads = timers["read+check"].wrap_iter(answers.checked_payloads)
        IngestRun.insert = timers["duckdb"].wrap(IngestRun.insert)
        IngestRun.quarantine = timers["duckdb"].wrap(IngestRun.quarantine)
    store = _PayloadOnlyStore(DATA / f"payloads_{size}")
    c0, started = time.process_time(), time.perf_counter()
    with ingest_run(con, source_id=store.source_id, kind=store.kind, display="bench") as run:
        ingester(con, store, run)
    elapsed = time.perf_counter() - started
    cpu_s = time.process_time() - c0 + _workers_cpu_s()
    rows, quarantined, nbytes = con.execute(
        "SELECT count(*), count(*) FILTER (WHERE problem IS NOT NULL), sum(response_bytes) FROM answer_checks_t"
    ).fetchone()
    con.close()
    breakdown = {k: t.seconds for k, t in timers.items()}
    breakdown["other"] = elapsed - sum(breakdown.values())
    return {
        "elapsed_s": elapsed,
        "cpu_s": cpu_s,
        "rows": rows,
        "quarantined": quarantined,
        "counts": run.rows,
        "processes": worker_count(),
        "response_bytes": int(nbytes or 0),
        "mb_per_s": (nbytes or 0) / 1e6 / elapsed,
        **({"breakdown_s": breakdown} if timed else {}),
        "duckdb_bytes": path.stat().st_size,
    }


def step_paired(size: int, rounds: int = ROUNDS) -> dict:
    """Baseline and one-process ingest alternated in this process: the same load for both."""
    import statistics

    os.environ["GONKA_EVIDENCE_WORKERS"] = "1"
    runs = []
    for _ in range(rounds):
        base = step_baseline(size)
        ingest = _ingest(size, timed=False)
        runs.append(
            {
                "baseline_s": base["elapsed_s"],
                "baseline_cpu_s": base["cpu_s"],
                "ingest_s": ingest["elapsed_s"],
                "ingest_cpu_s": ingest["cpu_s"],
                "ratio": base["elapsed_s"] / ingest["elapsed_s"],
                "load1": os.getloadavg()[0],
            }
        )
    base_s = statistics.median(r["baseline_s"] for r in runs)
    ingest_s = statistics.median(r["ingest_s"] for r in runs)
    return {
        "rounds": runs,
        "baseline_s": base_s,
        "elapsed_s": ingest_s,
        "ratio": base_s / ingest_s,
        "cpu_ratio": statistics.median(r["baseline_cpu_s"] for r in runs)
        / statistics.median(r["ingest_cpu_s"] for r in runs),
        "cpu_s": statistics.median(r["ingest_cpu_s"] for r in runs),
        "rows": ingest["rows"],
        "processes": 1,
        "response_bytes": ingest["response_bytes"],
        "mb_per_s": ingest["response_bytes"] / 1e6 / ingest_s,
    }


STEP_FUNCS = {
    "read": step_read,
    "baseline": step_baseline,
    "scanner": step_scanner,
    "row": step_row,
    "ingest_1": step_ingest_1,
    "ingest": step_ingest,
    "paired": step_paired,
}


def _workers_cpu_s() -> float:
    """CPU seconds of the worker processes this step ran (none: 0)."""
    import resource

    _stop_fork_server()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _stop_fork_server() -> None:
    """Stop (and wait for) multiprocessing's fork server, if a step started one: its workers are its
    children, so only then does the step's `os.wait4` count their CPU time."""
    from multiprocessing import forkserver

    forkserver._forkserver._stop()  # private, but the only way to reap it before exit (Python 3.11–3.13)


def run_step(step: str, size: int, rounds: int = ROUNDS) -> dict:
    """One step in a child process; its peak RSS from os.wait4 (ru_maxrss is KiB on Linux)."""
    with tempfile.NamedTemporaryFile(suffix=".json", dir=DATA, delete=False) as f:
        out = Path(f.name)
    import psutil

    proc = subprocess.Popen(
        [sys.executable, __file__, "--step", step, "--size", str(size), "--out", str(out)],
        env={**os.environ, "PAYLOADS_BENCH_ROUNDS": str(rounds)},
    )
    tree, peak_tree = psutil.Process(proc.pid), 0
    while True:  # sample the RSS of the step's whole process tree (workers included)
        pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        try:
            peak_tree = max(peak_tree, sum(p.memory_info().rss for p in [tree, *tree.children(recursive=True)]))
        except psutil.Error:
            pass  # a process ended between listing and reading
        time.sleep(0.05)
    code = os.waitstatus_to_exitcode(status)
    try:
        result = json.loads(out.read_text()) if code == 0 else {"error": f"exit code {code}"}
    except (OSError, ValueError) as exc:
        result = {"error": str(exc)}
    finally:
        out.unlink(missing_ok=True)
    result["peak_rss_bytes"] = rusage.ru_maxrss * 1024
    result["peak_rss_tree_bytes"] = peak_tree
    result["step_cpu_s"] = rusage.ru_utime + rusage.ru_stime
    result["loadavg_after"] = os.getloadavg()
    return result


# -- report ---------------------------------------------------------------------------------------


def evaluate(sizes: dict) -> dict:
    out = {}
    for size, r in sizes.items():
        s = r["steps"]
        base = s.get("baseline", {}).get("mb_per_s")
        if "ratio" in s.get("paired", {}):
            ratio = s["paired"]["ratio"]
            out[f"{size} ingest (1 process) vs json.loads, paired in one process"] = {
                "value": ratio,
                "target": f">= {TARGETS['ingest_vs_json_loads']}",
                "pass": ratio >= TARGETS["ingest_vs_json_loads"],
            }
        if not base:
            continue
        for step, what in (
            ("scanner", "scanner"),
            ("ingest_1", "full ingest (1 process, default), separate steps"),
            ("ingest", "full ingest (2 workers), separate steps"),
        ):
            if "mb_per_s" in s.get(step, {}):
                out[f"{size} {what} vs json.loads"] = {
                    "value": s[step]["mb_per_s"] / base,
                    "target": "(none)",
                    "pass": None,
                }
    names = list(sizes)
    if len(names) >= 2:
        small, large = names[0], names[-1]
        growth = {}
        for step in STEPS:
            a = sizes[small]["steps"].get(step, {}).get("peak_rss_bytes")
            b = sizes[large]["steps"].get(step, {}).get("peak_rss_bytes")
            if a and b:
                growth[step] = b / a
        if growth:
            worst = max(v for k, v in growth.items() if k != "baseline") if len(growth) > 1 else max(growth.values())
            out["rss_growth"] = {
                "value": worst,
                "by_step": growth,
                "between": [small, large],
                "target": f"<= {TARGETS['rss_growth']}",
                "pass": worst <= TARGETS["rss_growth"],
            }
    return out


LABELS = {
    "read": "read: file + base64 decode only (floor)",
    "baseline": "baseline: json.loads + naive checks",
    "scanner": "scanner: `scan_response` (msgspec), one process",
    "row": "`check_payload` (request + response + row), one process",
    "ingest_1": "full payload plane ingest → DuckDB, one process (default)",
    "ingest": "full payload plane ingest → DuckDB, 2 worker processes (opt-in)",
    "paired": "**paired: the same ingest, median of the rounds alternated with the baseline in one process**",
}


def render(results: dict) -> str:
    lines = []
    for size, r in results["sizes"].items():
        c = r["store"]
        lines.append(
            f"\n## {size} MB: {c['payloads']:,} payloads, {c['response_bytes'] / 1e6:,.0f} MB response bodies, "
            f"{c['file_bytes'] / 1e6:,.0f} MB payload files"
        )
        lines.append(
            "| step | processes | bodies | wall s | CPU s | MB/s | vs baseline "
            "| peak RSS MiB (largest process / all) | load1 after |"
        )
        lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        base = r["steps"].get("baseline", {}).get("mb_per_s")
        for step in STEPS:
            x = r["steps"].get(step)
            if not x:
                continue
            if "error" in x:
                lines.append(
                    f"| {LABELS[step]} | | error: {x['error']} | | | | | {x['peak_rss_bytes'] / 2**20:,.0f} | |"
                )
                continue
            n = x.get("bodies", x.get("rows", 0))
            vs = f"{x['ratio']:.2f}× (paired)" if step == "paired" else f"{x['mb_per_s'] / base:.2f}×" if base else ""
            lines.append(
                f"| {LABELS[step]} | {x.get('processes', 1)} | {n:,} | {x['elapsed_s']:.2f} | {x['cpu_s']:.2f} | "
                f"{x['mb_per_s']:,.1f} | {vs} | {x['peak_rss_bytes'] / 2**20:,.0f} / "
                f"{x.get('peak_rss_tree_bytes', 0) / 2**20:,.0f} | {x['loadavg_after'][0]:.2f} |"
            )
        paired = r["steps"].get("paired", {})
        if "rounds" in paired:
            rounds = "; ".join(
                f"{x['baseline_s']:.2f} s / {x['ingest_s']:.2f} s = {x['ratio']:.2f}× (load {x['load1']:.1f})"
                for x in paired["rounds"]
            )
            lines.append(
                f"\npaired (baseline / ingest, wall): {rounds}; median ratio {paired['ratio']:.2f}×, "
                f"CPU-time ratio {paired['cpu_ratio']:.2f}×"
            )
        for step in ("ingest_1", "ingest"):
            ing = r["steps"].get(step, {})
            if "breakdown_s" in ing:
                parts = ", ".join(f"{k} {v:.2f}s ({v / ing['elapsed_s']:.0%})" for k, v in ing["breakdown_s"].items())
                lines.append(f"\n{step} time: {parts}; {ing['rows']:,} rows, {ing['quarantined']} quarantined")
    lines.append("\n## targets")
    for name, e in results["targets"].items():
        if name == "rss_growth":
            by = ", ".join(f"{k} ×{v:.2f}" for k, v in e["by_step"].items())
            lines.append(
                f"- peak RSS growth {e['between'][0]}→{e['between'][1]} MB (same step): "
                f"worst of ours ×{e['value']:.2f} "
                f"({by}) (target {e['target']}): {'PASS' if e['pass'] else 'FAIL'}"
            )
        elif e["pass"] is None:
            lines.append(f"- {name}: {e['value']:.2f}×")
        else:
            lines.append(f"- {name}: {e['value']:.2f}× (target {e['target']}): {'PASS' if e['pass'] else 'FAIL'}")
    return "\n".join(lines)


def machine() -> dict:
    import platform

    import duckdb
    import msgspec
    import orjson

    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "orjson": orjson.__version__,
        "msgspec": msgspec.__version__,
        "duckdb": duckdb.__version__,
        "loadavg_start": os.getloadavg(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="gonka-evidence payload-scanning benchmark")
    parser.add_argument("--sizes", default="100,300", help="response-body MB per size, comma separated")
    parser.add_argument("--steps", default=",".join(STEPS))
    parser.add_argument("--regenerate", action="store_true")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="baseline/ingest rounds of the paired step")
    parser.add_argument("--output", default=str(RESULTS / "payloads.json"))
    parser.add_argument("--step", help=argparse.SUPPRESS)
    parser.add_argument("--size", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.step:
        func = STEP_FUNCS[args.step]
        result = (
            func(int(args.size), int(os.environ["PAYLOADS_BENCH_ROUNDS"]))
            if func is step_paired
            else func(int(args.size))
        )
        Path(args.out).write_text(json.dumps(result, default=str))
        return 0

    DATA.mkdir(parents=True, exist_ok=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    sizes = sorted(int(s) for s in args.sizes.split(",") if s.strip())
    steps = [s for s in args.steps.split(",") if s]
    infos = ensure(sizes, args.regenerate)
    results = {
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "command": " ".join([Path(sys.executable).name, "bench/payloads_bench.py", *(argv or sys.argv[1:])]),
        "targets_spec": TARGETS,
        "sizes": {},
    }
    for size in sizes:
        print(f"[{size} MB] store: {json.dumps(infos[size])}", flush=True)
        run_step("read", size)  # warm-up: the page cache holds the files for every step alike
        entry = {"store": infos[size], "steps": {}}
        for step in steps:
            r = run_step(step, size, args.rounds)
            entry["steps"][step] = r
            brief = {k: r[k] for k in ("elapsed_s", "mb_per_s", "peak_rss_bytes", "error") if k in r}
            print(f"[{size} MB] {step}: {json.dumps(brief)} load {os.getloadavg()[0]:.2f}", flush=True)
        results["sizes"][str(size)] = entry
        results["targets"] = evaluate(results["sizes"])
        Path(args.output).write_text(json.dumps(results, indent=2, default=str))
    results["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    results["machine"]["loadavg_end"] = os.getloadavg()
    results["targets"] = evaluate(results["sizes"])
    results["rendered"] = render(results)
    Path(args.output).write_text(json.dumps(results, indent=2, default=str))
    print(results["rendered"])
    print(f"\nwritten: {args.output}")
    return 1 if any("error" in s for r in results["sizes"].values() for s in r["steps"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
