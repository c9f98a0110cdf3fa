"""The log benchmark: our vLLM log parser against `grep -c`, and the end-to-end `ingest-logs`.

    python bench/logs_bench.py [--size-gb 1] [--small-gb 0.25] [--regenerate] [--profile]
                               [--before OTHER/.venv/bin/gonka-evidence]

Generates once, into the git-ignored bench/data/, realistic vLLM logs of ~0.25 GB and
~1 GB (`vllm_<size>gb.log`), built by rendering a few dozen segments written by the
project's own fixture generator (pipeline/samples/logs.py: 0.8.5, 0.9.1 with two DP
engines, 0.10.2 and 0.11.1 with ANSI colour and `(EngineCore_DP0 pid=N)` prefixes,
start-up blocks, stats + SpecDecoding lines every 10 s, DEBUG idle windows, PoC
windows, OOM / illegal-access tracebacks, worker deaths, one unknown-format line)
over and over with advancing timestamps (Sep → Apr, so one December → January
rollover). Then, per size, each step in its own child process, peak RSS from
`os.wait4` (`ru_maxrss` of exactly that child), one unmeasured `cat` warms the page
cache first; grep, parse and ingest run --repeat times (default 3) and their median is kept:

  grep_c     LC_ALL=C grep -c -E '<the patterns our parser dispatches on>' FILE  (the floor)
  grep_utf8  the same with LC_ALL=C.UTF-8 (the machine's locale)
  read       LogFile.lines() alone: Python's line iteration + UTF-8 decode (no parsing)
  parse      pipeline.sources.logs.vllm.iter_vllm_batches over the file (no warehouse; streaming)
  ingest     the whole `gonka-evidence ingest-logs FILE --host H --year 2025 --warehouse NEW` process
             (imports, schema, parse, warehouse write), its rows counted afterwards in another child
  ingest_before  the same command of the installation given by --before (the code before a change),
             run in alternating pairs with `ingest` (AB BA …), so that the ratio is measured under the same load

Every parse / ingest is checked against the counts the generator implies (records per
table, unparsed lines). Results: bench/results/logs.json and a printed table; targets:
parse MB/s >= 25% of the grep floor's MB/s, peak RSS not growing with file size
(1 GB <= 1.10 x 0.25 GB), and ingest >= 40 MB/s end to end for logs of 200 MB or more. A child whose RSS
passes --rss-limit-gb is killed (so a parser that keeps everything cannot take the shared machine down) and
reported as such.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
DATA = BENCH / "data"
RESULTS = BENCH / "results"
sys.path.insert(0, str(ROOT))

from pipeline.core.address import sample_address  # noqa: E402 (the checkout, on sys.path above)

UTC = UTC
HOST = sample_address("l0gvench")
YEAR = 2025  # year of the file's first record (--year)
START = datetime(2025, 9, 1, 8, 0, 0, tzinfo=UTC)
# What the parser dispatches on (vllm_logs.parse_vllm_log / _events / OOM / iter_records' traceback folding).
GREP_PATTERNS = [
    "SpecDecoding metrics:",
    "Avg prompt throughput:",
    r"LLM engine \(v",
    "version ",
    "EngineCore encountered a fatal error",
    "EngineCore failed to start",
    "EngineDeadError",
    "died unexpectedly",
    "died with exit code",
    "AsyncLLM output_handler failed",
    "PoC generation started",
    "PoC stopped",
    "PoC generation crashed",
    "Application startup complete",
    "Traceback",
    "OutOfMemoryError",
    "CUDA out of memory",
    "not enough GPU memory",
    "No available memory for the cache blocks",
    "larger than the available KV cache memory",
]
GREP_RE = "|".join(GREP_PATTERNS)
STEPS = ("grep_c", "grep_utf8", "read", "parse", "ingest", "ingest_before")
REPEATED = ("grep_c", "grep_utf8", "parse", "ingest", "ingest_before")  # the median of --repeat runs is kept
# ingest: the whole `gonka-evidence ingest-logs FILE --host H --year 2025 --warehouse NEW.duckdb` process of
# this checkout (imports, schema creation, parse, warehouse write); ingest_before: the same command of
# another installation (--before, e.g. the main checkout's venv), run alternately in the same session
TARGETS = {"parse_vs_grep_floor": 0.25, "rss_growth": 1.10, "ingest_mb_per_s": 40.0}
INGEST_TARGET_MIN_BYTES = 200_000_000  # the ingest target is for logs of at least 200 MB
SEEDS_PER_VARIANT = 5
WINDOWS_PER_SEGMENT = 180  # 30 minutes of 10-second windows per engine lifetime
STAMP = re.compile(r"(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)")


# -- data ----------------------------------------------------------------------------------------


def _segment_lines(variant: int, seed: int) -> list[str]:
    """One engine lifetime in the format of one vLLM version, written by the project's generator."""
    from pipeline.samples.logs import LogTruth, VllmFile

    rng = random.Random(1000 * variant + seed)
    t0 = datetime(2026, 6, 1, tzinfo=UTC)
    truth = LogTruth()
    w = WINDOWS_PER_SEGMENT
    if variant == 0:  # 0.8.5: MAL without the +1, no prefixes, DEBUG idle stats
        f = VllmFile(truth, rng, "0.8.5", t0)
        f.start(ready_after=90)
        for i in range(w):
            f.window()
            if i % 60 == 59:
                f.idle(6, debug=True)
    elif variant == 1:  # 0.9.1: `Engine 000:` stats, two DP engines, a worker death
        f = VllmFile(truth, rng, "0.9.1", t0)
        f.start(ready_after=120)
        for _ in range(w):
            f.window()
        f.worker_died()
        lines = []
        for line in f.lines:  # the second data-parallel engine prints its own stats line
            lines.append(line)
            if "Engine 000: Avg prompt throughput" in line:
                lines.append(line.replace("Engine 000: ", "Engine 001: ").replace("Running: ", "Running: 1"))
        return lines
    elif variant == 2:  # 0.10.2: ANSI process prefixes, PoC window, OOM crash with traceback
        f = VllmFile(truth, rng, "0.10.2", t0, proc="EngineCore_DP0", pid=2834 + seed, colour=True)
        f.start(ready_after=150)
        for i in range(w // 2):
            f.window(extra=", top1: 0.812" if i == 3 else "")
        f.poc(nonces=4200 + seed)
        for _ in range(w // 2):
            f.window()
        f.fatal(oom=True)
        f.worker_died()
    else:  # 0.11.1: coloured levels, Preemptions:, PoC, an unknown-format line, illegal-access crash
        f = VllmFile(truth, rng, "0.11.1", t0, proc="EngineCore_DP0", pid=3120 + seed, colour=True)
        f.start(ready_after=200)
        for i in range(w // 2):
            f.window(preemptions=(i % 7 == 0) * (i // 7 + 1))
        f.raw(
            "2027-01-05T10:00:00.123Z | INFO | vllm.v2.metrics | SpecDecoding metrics: mal=3.10 acc=1000 drafted=2500"
        )
        f.poc(nonces=3900 + seed)
        for i in range(w // 2):
            f.window(preemptions=3 if i == 10 else 0)
        f.fatal(oom=False)
    return f.lines


class Template:
    """A segment with its `MM-DD HH:MM:SS` stamps cut out, re-rendered at any start time."""

    def __init__(self, lines: list[str]):
        t0 = datetime(2026, 6, 1, tzinfo=UTC)
        self.pieces: list[str] = []
        self.slots: list[tuple[int, int]] = []  # (index in pieces, seconds after the segment start)
        text = "\n".join(lines) + "\n"
        pos = 0
        for m in STAMP.finditer(text):
            mon, day, h, mi, s = (int(x) for x in m.groups())
            offset = int((datetime(2026, mon, day, h, mi, s, tzinfo=UTC) - t0).total_seconds())
            self.pieces.append(text[pos : m.start()])
            self.slots.append((len(self.pieces), offset))
            self.pieces.append("")
            pos = m.end()
        self.pieces.append(text[pos:])
        self.duration = max(o for _, o in self.slots)
        self.lines = len(lines)

    def render(self, start: datetime) -> str:
        pieces = self.pieces[:]
        base = start.timestamp()
        cache: dict[int, str] = {}
        for index, offset in self.slots:
            stamp = cache.get(offset)
            if stamp is None:
                stamp = cache[offset] = time.strftime("%m-%d %H:%M:%S", time.gmtime(base + offset))
            pieces[index] = stamp
        return "".join(pieces)


def _template_counts(template: Template) -> dict:
    """What the real parser finds in one rendered segment (summed into the file's expected counts)."""
    from pipeline.sources.logs.files import LogFile
    from pipeline.sources.logs.vllm import parse_vllm_log

    with tempfile.NamedTemporaryFile("w", suffix=".log", dir=DATA, delete=False, encoding="utf-8") as fh:
        fh.write(template.render(START))
        path = Path(fh.name)
    try:
        p = parse_vllm_log(LogFile(path, datetime.now(UTC)), YEAR)
    finally:
        path.unlink()
    events = Counter(e["kind"] for e in p.events)
    return {
        "lines": p.lines,
        "records": p.records,
        "spec": len(p.spec),
        "stats": len(p.stats),
        "events": len(p.events),
        "unparsed": len(p.unparsed),
        "event_kinds": dict(events),
    }


def generate(size_gb: float, path: Path) -> dict:
    """Write ~size_gb GB of log to `path` (whole segments); returns the counts the parser must find."""
    started = time.perf_counter()
    templates = {(v, s): Template(_segment_lines(v, s)) for v in range(4) for s in range(SEEDS_PER_VARIANT)}
    counts = {key: _template_counts(t) for key, t in templates.items()}
    rng = random.Random(5)
    target = int(size_gb * 1e9)
    expected = Counter()
    kinds = Counter()
    written, segments, at = 0, 0, START
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8", newline="\n", buffering=1 << 20) as fh:
        while written < target:
            key = (segments % 4, (segments // 4) % SEEDS_PER_VARIANT)
            text = templates[key].render(at)
            fh.write(text)
            written += len(text.encode("utf-8")) if not text.isascii() else len(text)
            for name, n in counts[key].items():
                if name == "event_kinds":
                    kinds.update(n)
                else:
                    expected[name] += n
            at += timedelta(seconds=templates[key].duration + rng.randint(30, 600))  # restart gap
            segments += 1
    tmp.replace(path)
    os.utime(path, (at.timestamp(), at.timestamp()))  # the file time is the time of its last line
    meta = {
        "path": str(path),
        "bytes": path.stat().st_size,
        "segments": segments,
        "first_at": START.isoformat(),
        "last_at": at.isoformat(),
        "expected": dict(expected),
        "expected_event_kinds": dict(kinds),
        "generate_s": round(time.perf_counter() - started, 1),
        "generator_version": 1,
    }
    path.with_suffix(".json").write_text(json.dumps(meta, indent=2))
    return meta


def data_file(size_gb: float, regenerate: bool) -> dict:
    path = DATA / f"vllm_{size_gb:g}gb.log"
    meta_path = path.with_suffix(".json")
    if not regenerate and path.exists() and meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if meta.get("bytes") == path.stat().st_size and meta.get("generator_version") == 1:
            return meta
    print(f"[{size_gb:g} GB] generating {path} …", flush=True)
    # In a child: the parent must stay small, because a child's ru_maxrss starts at the RSS its
    # parent had when it was forked (Linux keeps the pre-exec high-water mark).
    subprocess.run(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--step",
            "generate",
            "--file",
            str(path),
            "--size-gb",
            str(size_gb),
        ],
        check=True,
    )
    meta = json.loads(meta_path.read_text())
    print(
        f"[{size_gb:g} GB] {meta['bytes'] / 1e6:,.0f} MB, {meta['expected']['lines']:,} lines, "
        f"{meta['segments']:,} segments in {meta['generate_s']} s",
        flush=True,
    )
    return meta


# -- steps (child processes) ---------------------------------------------------------------------


def step_read(path: Path) -> dict:
    from pipeline.sources.logs.files import LogFile

    file = LogFile(path, datetime.fromtimestamp(path.stat().st_mtime, UTC))
    started = time.perf_counter()
    n = 0
    for _ in file.lines():
        n += 1
    return {"elapsed_s": time.perf_counter() - started, "lines": n}


def step_parse(path: Path) -> dict:
    """The streaming parser over the whole file: every chunk's row frames (with record_key and `at`)
    are built and dropped; only counts are kept."""
    from pipeline.sources.logs.files import LogFile
    from pipeline.sources.logs.vllm import VllmStream, iter_vllm_batches

    file = LogFile(path, datetime.fromtimestamp(path.stat().st_mtime, UTC))
    started = time.perf_counter()
    stream = VllmStream(YEAR)
    n = Counter()
    kinds = Counter()
    batches = 0
    for b in iter_vllm_batches(file, YEAR, stream):
        batches += 1
        n["spec"] += b.spec.height
        n["stats"] += b.stats.height
        n["events"] += b.events.height
        kinds.update(b.events["kind"].to_list())
    elapsed = time.perf_counter() - started
    return {
        "elapsed_s": elapsed,
        "lines": stream.lines,
        "records": stream.records,
        "spec": n["spec"],
        "stats": n["stats"],
        "events": n["events"],
        "unparsed": stream.unparsed,
        "event_kinds": dict(kinds),
        "batches": batches,
        "first_at": str(stream.at(stream.first)),
        "last_at": str(stream.at(stream.last)),
    }


def step_count(db: Path) -> dict:
    """What an ingest child left in its warehouse (counted in a separate child: the parent stays small)."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    tables = {
        t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
        for t in ("log_spec_decode", "log_engine_stats", "log_engine_events")
    }
    quarantined = con.execute("SELECT count(*) FROM quarantine").fetchone()[0]
    lines = con.execute("SELECT sum(lines) FROM log_files").fetchone()[0]
    con.close()
    return {
        "lines": lines,
        "spec": tables["log_spec_decode"],
        "stats": tables["log_engine_stats"],
        "events": tables["log_engine_events"],
        "unparsed": quarantined,
        "duckdb_bytes": db.stat().st_size,
    }


STEP_FUNCS = {"read": step_read, "parse": step_parse, "count": step_count}
CLI = Path(sys.executable).with_name("gonka-evidence")


# -- orchestration -------------------------------------------------------------------------------


def _rss_watch(pid: int, limit: int, samples: list, killed: list, stop: threading.Event) -> None:
    """Sample the child's RSS every 0.5 s; kill that child (only it) above `limit` bytes."""
    started = time.perf_counter()
    while not stop.wait(0.5):
        try:
            with open(f"/proc/{pid}/status") as fh:
                rss = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmRSS:"))
        except (OSError, StopIteration):
            return
        samples.append((round(time.perf_counter() - started, 1), rss))
        if rss > limit and not killed:
            killed.append(rss)
            os.kill(pid, 9)


def run_child(argv: list[str], env: dict | None, rss_limit: int) -> tuple[dict, object, float, list, list]:
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    proc = subprocess.Popen(argv, env=os.environ | (env or {}), stdout=subprocess.PIPE)
    samples: list = []
    killed: list = []
    stop = threading.Event()
    watcher = threading.Thread(target=_rss_watch, args=(proc.pid, rss_limit, samples, killed, stop), daemon=True)
    watcher.start()
    stdout = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    stop.set()
    watcher.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    info = {
        "exit_code": proc.returncode,
        "peak_rss_bytes": usage.ru_maxrss * 1024,
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "child_wall_s": round(wall, 2),
        "load1_before": load_before,
        "load1_after": os.getloadavg()[0],
    }
    if killed:
        info["killed_at_rss_bytes"] = killed[0]
    if samples:  # RSS over the run (a handful of points): growth within one run shows up here
        step = max(1, len(samples) // 8)
        info["rss_samples"] = [(t, round(r / 2**20)) for t, r in samples[::step]]
    return info, stdout, wall, samples, killed


def run_ingest(step: str, path: Path, rss_limit: int, before: Path | None) -> dict:
    """One end-to-end `gonka-evidence ingest-logs` process into a fresh warehouse, then its rows counted."""
    cli = before if step == "ingest_before" else CLI
    if cli is None:
        return {"error": "no --before installation given"}
    db = DATA / f"logs_{path.stem}_{step}.duckdb"
    for p in (db, db.with_name(db.name + ".wal")):
        p.unlink(missing_ok=True)
    info, _, wall, _, _ = run_child(
        [str(cli), "ingest-logs", str(path), "--host", HOST, "--year", str(YEAR), "--warehouse", str(db)],
        {"COLUMNS": "200"},
        rss_limit,
    )
    info["elapsed_s"], info["command"] = wall, f"{cli} ingest-logs FILE --host … --year {YEAR} --warehouse NEW"
    if info["exit_code"] != 0:
        info["error"] = (
            f"killed above the RSS limit ({info['killed_at_rss_bytes'] / 2**30:.1f} GiB)"
            if "killed_at_rss_bytes" in info
            else f"exit code {info['exit_code']}"
        )
        return info
    counted = run_child_step("count", db, rss_limit)
    return info | {k: v for k, v in counted.items() if k not in info}


def run_child_step(step: str, path: Path, rss_limit: int) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", dir=DATA, delete=False) as tmp:
        out = Path(tmp.name)
    try:
        info, _, _, _, _ = run_child(
            [sys.executable, str(Path(__file__).resolve()), "--step", step, "--file", str(path), "--out", str(out)],
            None,
            rss_limit,
        )
        if info["exit_code"] == 0:
            return json.loads(out.read_text()) | info
        info["error"] = (
            f"killed above the RSS limit ({info['killed_at_rss_bytes'] / 2**30:.1f} GiB)"
            if "killed_at_rss_bytes" in info
            else f"exit code {info['exit_code']}"
        )
        return info
    finally:
        out.unlink(missing_ok=True)


def run_step(step: str, meta: dict, rss_limit: int, before: Path | None = None) -> dict:
    path = Path(meta["path"])
    if step.startswith("ingest"):
        info = run_ingest(step, path, rss_limit, before)
    elif step.startswith("grep"):
        locale = "C" if step == "grep_c" else "C.UTF-8"
        info, stdout, wall, _, _ = run_child(["grep", "-c", "-E", GREP_RE, str(path)], {"LC_ALL": locale}, rss_limit)
        info.update(elapsed_s=wall, matches=int(stdout.strip() or 0), locale=locale)
    else:
        info = run_child_step(step, path, rss_limit)
    if "elapsed_s" in info:
        mb = meta["bytes"] / 1e6
        info["mb_per_s"] = mb / info["elapsed_s"]
        info["lines_per_s"] = meta["expected"]["lines"] / info["elapsed_s"]
        info["mb_per_cpu_s"] = mb / max(info.get("cpu_s") or 0, 0.01)  # rusage resolution
    return info


def run_repeated(step: str, meta: dict, rss_limit: int, repeat: int, before: Path | None = None) -> dict:
    """`run_step` `repeat` times (the steps the targets compare): the run of median time, with the median
    peak RSS of the runs, and every run's time, CPU and peak in `runs` (one run of a shared two-core
    machine moves by ±5% in time and ±4% in peak RSS)."""
    return _summary([run_step(step, meta, rss_limit, before) for _ in range(max(repeat, 1))])


def run_alternating(steps: tuple[str, str], meta: dict, rss_limit: int, repeat: int, before: Path) -> dict:
    """`run_repeated` of two steps in pairs, the order swapped from pair to pair (AB BA AB …): a machine
    whose speed drifts during the session moves both alike, where five runs of one then five of the other
    would not."""
    runs: dict[str, list] = {step: [] for step in steps}
    for i in range(max(repeat, 1)):
        for step in steps if i % 2 == 0 else steps[::-1]:
            runs[step].append(run_step(step, meta, rss_limit, before))
    return {step: _summary(r) for step, r in runs.items()}


def _summary(runs: list[dict]) -> dict:
    failed = [r for r in runs if "error" in r]
    if failed or len(runs) == 1:
        return failed[0] if failed else runs[0]
    chosen = sorted(runs, key=lambda r: r["elapsed_s"])[len(runs) // 2]
    peaks = sorted(r["peak_rss_bytes"] for r in runs)
    return chosen | {
        "peak_rss_bytes": peaks[len(peaks) // 2],
        "runs": [{k: r[k] for k in ("elapsed_s", "cpu_s", "peak_rss_bytes")} for r in runs],
    }


def check(step: str, r: dict, expected: dict) -> list[str]:
    """Differences between what a step found and what the generator wrote."""
    if "error" in r or step.startswith("grep"):
        return []
    keys = {
        "read": ("lines",),
        "parse": ("lines", "records", "spec", "stats", "events", "unparsed"),
        "ingest": ("lines", "spec", "stats", "events", "unparsed"),
    }[step.removesuffix("_before")]
    return [f"{k}: {r.get(k)} != expected {expected[k]}" for k in keys if r.get(k) != expected[k]]


def profile_parse(meta: dict, out: Path, rate: int = 50) -> dict:
    """py-spy over a parse child; self / inclusive sample shares per function, and self per line."""
    raw = out.with_suffix(".txt")
    with tempfile.NamedTemporaryFile(suffix=".json", dir=DATA, delete=False) as tmp:
        res = Path(tmp.name)
    subprocess.run(
        [
            "py-spy",
            "record",
            "--format",
            "raw",
            "-r",
            str(rate),
            "-o",
            str(raw),
            "--",
            sys.executable,
            str(Path(__file__).resolve()),
            "--step",
            "parse",
            "--file",
            meta["path"],
            "--out",
            str(res),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    res.unlink(missing_ok=True)
    func = lambda f: re.sub(r":\d+\)$", ")", f).replace(str(ROOT) + "/", "")  # noqa: E731
    self_, incl, lines, total = Counter(), Counter(), Counter(), 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = [f for f in stack.split(";") if f]
        if not frames or not n.isdigit():
            continue
        n = int(n)
        total += n
        lines[frames[-1].replace(str(ROOT) + "/", "")] += n
        self_[func(frames[-1])] += n
        for f in {func(f) for f in frames}:
            incl[f] += n
    share = lambda c, k: [(f, round(v / total, 3)) for f, v in c.most_common(k)]  # noqa: E731
    return {
        "samples": total,
        "rate_hz": rate,
        "raw": str(raw),
        "self": share(self_, 15),
        "inclusive": share(incl, 25),
        "self_lines": share(lines, 20),
    }


def machine() -> dict:
    import duckdb
    import polars

    grep = subprocess.run(["grep", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "duckdb": duckdb.__version__,
        "polars": polars.__version__,
        "grep": grep,
        "mem_total_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
    }


def _own_rss() -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmHWM:"))


def other_load() -> list[str]:
    """The busiest other processes at the start (the machine is shared)."""
    ps = subprocess.run(["ps", "-eo", "pid,pcpu,rss,args", "--sort=-pcpu"], capture_output=True, text=True).stdout
    me = os.getpid()
    return [line[:160] for line in ps.splitlines()[1:8] if line.split()[0] != str(me)][:5]


def evaluate(sizes: dict) -> dict:
    """The targets (the parse of the large file; parse memory from the small to the large file) and,
    marked `reference`, the same measures where no target applies (the small file, the ingest)."""
    targets = {}
    largest = max(sizes, key=lambda k: sizes[k]["file"]["bytes"])
    for size, entry in sizes.items():
        s = entry["steps"]
        floor = max((s[g]["mb_per_s"] for g in ("grep_c", "grep_utf8") if "mb_per_s" in s.get(g, {})), default=None)
        for step in ("parse", "ingest"):
            if floor and "mb_per_s" in s.get(step, {}):
                share = s[step]["mb_per_s"] / floor
                targets[f"{size} {step} vs grep floor"] = {
                    "value": share,
                    "target": TARGETS["parse_vs_grep_floor"],
                    "pass": share >= TARGETS["parse_vs_grep_floor"],
                    "reference": step != "parse" or size != largest,
                    "cpu_value": s[step]["mb_per_cpu_s"]
                    / max(s[g]["mb_per_cpu_s"] for g in ("grep_c", "grep_utf8") if "mb_per_cpu_s" in s.get(g, {})),
                }
        ingest = s.get("ingest", {})
        if "mb_per_s" in ingest and entry["file"]["bytes"] >= INGEST_TARGET_MIN_BYTES:
            targets[f"{size} ingest MB/s (end to end)"] = {
                "value": ingest["mb_per_s"],
                "target": TARGETS["ingest_mb_per_s"],
                "pass": ingest["mb_per_s"] >= TARGETS["ingest_mb_per_s"] and not ingest.get("mismatch"),
            }
        if "mb_per_s" in ingest and "mb_per_s" in s.get("ingest_before", {}):
            targets[f"{size} ingest speed vs --before"] = {
                "value": ingest["mb_per_s"] / s["ingest_before"]["mb_per_s"],
                "target": 1.0,
                "reference": True,
                "pass": True,
                "memory_ratio": ingest["peak_rss_bytes"] / s["ingest_before"]["peak_rss_bytes"],
            }
            if len(ingest.get("runs", [])) == len(s["ingest_before"].get("runs", [])) > 1:  # run in pairs
                pairs = zip(ingest["runs"], s["ingest_before"]["runs"], strict=True)
                ratios = sorted(b["elapsed_s"] / a["elapsed_s"] for a, b in pairs)
                targets[f"{size} ingest speed vs --before"]["pair_ratio_median"] = ratios[len(ratios) // 2]
    keys = sorted(sizes, key=lambda k: sizes[k]["file"]["bytes"])
    if len(keys) >= 2:
        small, large = sizes[keys[0]]["steps"], sizes[keys[-1]]["steps"]
        for step in ("parse", "ingest"):
            if step in small and step in large and "error" not in small[step]:
                growth = (large[step].get("killed_at_rss_bytes") or large[step]["peak_rss_bytes"]) / small[step][
                    "peak_rss_bytes"
                ]
                targets[f"{step} peak RSS {keys[-1]} / {keys[0]}"] = {
                    "value": growth,
                    "target": TARGETS["rss_growth"],
                    "pass": growth <= TARGETS["rss_growth"] and "error" not in large[step],
                    "reference": step != "parse",
                }
    return targets


def render(results: dict) -> str:
    lines = []
    names = {
        "grep_c": "grep -c -E (LC_ALL=C)",
        "grep_utf8": "grep -c -E (LC_ALL=C.UTF-8)",
        "read": "LogFile.lines() only (no parse)",
        "parse": "iter_vllm_batches (no warehouse)",
        "ingest": "gonka-evidence ingest-logs → fresh DuckDB (whole process)",
        "ingest_before": "the same, --before installation",
    }
    for size, entry in results["sizes"].items():
        f = entry["file"]
        lines.append(
            f"\n**{size}**: {f['bytes'] / 1e6:,.0f} MB, {f['expected']['lines']:,} lines, "
            f"{f['expected']['spec']:,} spec + {f['expected']['stats']:,} stats + "
            f"{f['expected']['events']:,} event records, {f['expected']['unparsed']:,} unparsed\n"
        )
        lines.append(
            "| step | seconds | MB/s | lines/s | vs floor (faster grep) | CPU s | MB per CPU-s | peak RSS MiB "
            "| load1 before→after | check |"
        )
        lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
        floor = max(
            (entry["steps"][g]["mb_per_s"] for g in ("grep_c", "grep_utf8") if "mb_per_s" in entry["steps"].get(g, {})),
            default=None,
        )  # the faster grep, as in evaluate
        for step, r in entry["steps"].items():
            if "error" in r:
                lines.append(
                    f"| {names[step]} | {r.get('child_wall_s', 0):.1f} | | | | {r.get('cpu_s', 0):.1f} | | "
                    f"{r['peak_rss_bytes'] / 2**20:,.0f} | {r['load1_before']:.1f}→{r['load1_after']:.1f} "
                    f"| **{r['error']}** |"
                )
                continue
            share = f"{r['mb_per_s'] / floor:.3f}×" if floor else ""
            ok = "ok" if not r.get("mismatch") else "; ".join(r["mismatch"])
            if step.startswith("grep"):
                ok = f"{r['matches']:,} matching lines"
            lines.append(
                f"| {names[step]} | {r['elapsed_s']:.2f} | {r['mb_per_s']:,.1f} | {r['lines_per_s']:,.0f} | {share} | "
                f"{r['cpu_s']:.1f} | {r.get('mb_per_cpu_s', 0):,.1f} | {r['peak_rss_bytes'] / 2**20:,.0f} | "
                f"{r['load1_before']:.1f}→{r['load1_after']:.1f} | {ok} |"
            )
        repeated = [(names[step], r["runs"]) for step, r in entry["steps"].items() if "runs" in r]
        if repeated:
            lines.append(
                "\nMedian of "
                + "; ".join(
                    f"{name}: "
                    + ", ".join(f"{x['elapsed_s']:.2f} s / {x['peak_rss_bytes'] / 2**20:,.0f} MiB" for x in runs)
                    for name, runs in repeated
                )
                + "."
            )
    for heading, reference in (("Targets", False), ("For reference (no target)", True)):
        shown = {name: t for name, t in results.get("targets", {}).items() if t.get("reference", False) == reference}
        if shown:
            lines.append(f"\n{heading}:")
        for name, t in shown.items():
            extra = f" (by CPU time {t['cpu_value']:.3f})" if "cpu_value" in t else ""
            verdict = "" if reference else f": {'PASS' if t['pass'] else 'FAIL'}"
            if "memory_ratio" in t:
                extra += f", peak RSS ×{t['memory_ratio']:.2f}"
            if "pair_ratio_median" in t:
                extra += f", median of the alternating pairs' ratios {t['pair_ratio_median']:.3f}"
            sign = "≥" if "floor" in name or "MB/s" in name or "vs --before" in name else "≤"
            lines.append(
                f"- {name}: {t['value']:.3f} ({'target' if not reference else 'the target line'} "
                f"{sign} {t['target']}){extra}{verdict}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="gonka-evidence log-parsing benchmark (bench/BENCHMARKS.md, log parsing)"
    )
    parser.add_argument("--size-gb", type=float, default=1.0, help="the large file")
    parser.add_argument("--small-gb", type=float, default=0.25, help="the small file (RSS growth); 0 = none")
    parser.add_argument("--steps", default=",".join(STEPS))
    parser.add_argument("--regenerate", action="store_true")
    parser.add_argument("--profile", action="store_true", help="also py-spy the parse of the small file")
    parser.add_argument("--rss-limit-gb", type=float, default=12.0, help="kill a child above this RSS")
    parser.add_argument("--repeat", type=int, default=3, help="runs of grep and parse per size (the median is kept)")
    parser.add_argument("--output", default=str(RESULTS / "logs.json"))
    parser.add_argument(
        "--before",
        type=Path,
        help="another installation's gonka-evidence executable, for the "
        "ingest_before step (e.g. the main checkout's .venv/bin/gonka-evidence)",
    )
    parser.add_argument("--step", help=argparse.SUPPRESS)
    parser.add_argument("--file", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.step == "generate":
        generate(args.size_gb, Path(args.file))
        return 0
    if args.step:  # child process: one measured step
        result = STEP_FUNCS[args.step](Path(args.file))
        Path(args.out).write_text(json.dumps(result, default=str))
        return 0

    DATA.mkdir(parents=True, exist_ok=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    rss_limit = int(args.rss_limit_gb * 2**30)
    steps = [s for s in args.steps.split(",") if s]
    results = {
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": " ".join(["python", "bench/logs_bench.py", *(argv if argv is not None else sys.argv[1:])]),
        "other_processes_at_start": other_load(),
        "grep_pattern": GREP_RE,
        "targets_spec": TARGETS,
        "sizes": {},
    }
    sizes = sorted({g for g in (args.small_gb, args.size_gb) if g > 0})
    for size_gb in sizes:
        label = f"{size_gb:g} GB"
        meta = data_file(size_gb, args.regenerate)
        subprocess.run(["cat", meta["path"]], stdout=subprocess.DEVNULL, check=True)  # warm the page cache
        entry = {"file": meta, "steps": {}}
        paired = args.before is not None and {"ingest", "ingest_before"} <= set(steps)
        for step in steps:
            if step in entry["steps"] or (step == "ingest_before" and args.before is None):
                continue
            print(f"[{label}] {step} …", flush=True)
            if paired and step in ("ingest", "ingest_before"):
                found = run_alternating(("ingest", "ingest_before"), meta, rss_limit, args.repeat, args.before)
            else:
                found = {step: run_repeated(step, meta, rss_limit, args.repeat if step in REPEATED else 1, args.before)}
            for name, r in found.items():
                r["mismatch"] = check(name, r, meta["expected"])
                entry["steps"][name] = r
                brief = {
                    k: (round(r[k], 2) if isinstance(r[k], float) else r[k])
                    for k in ("elapsed_s", "mb_per_s", "lines_per_s", "cpu_s", "peak_rss_bytes", "error", "mismatch")
                    if k in r
                }
                print(f"[{label}] {name}: {json.dumps(brief)}", flush=True)
        results["sizes"][label] = entry
        results["targets"] = evaluate(results["sizes"])
        Path(args.output).write_text(json.dumps(results, indent=2, default=str))  # partial results survive
    if args.profile:
        print("[profile] py-spy over parse of the small file …", flush=True)
        meta = results["sizes"][f"{sizes[0]:g} GB"]["file"]
        results["profile_parse"] = profile_parse(meta, DATA / "logs_parse_pyspy")
    results["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    results["parent_peak_rss_bytes"] = _own_rss()  # the floor of every child's ru_maxrss
    results["machine"] = machine()  # imports duckdb/polars: only after the last child (see data_file)
    results["targets"] = evaluate(results["sizes"])
    results["rendered"] = render(results)
    Path(args.output).write_text(json.dumps(results, indent=2, default=str))
    print(results["rendered"])
    if "profile_parse" in results:
        print("\npy-spy self time (parse):")
        for f, share in results["profile_parse"]["self"]:
            print(f"  {share:6.1%}  {f}")
    print(f"\nwritten: {args.output}")
    return 1 if any("error" in s for e in results["sizes"].values() for s in e["steps"].values()) else 0


def rerender(path: str = str(RESULTS / "logs.json")) -> str:
    """Re-evaluate and re-render a results file (after a change to evaluate/render)."""
    results = json.loads(Path(path).read_text())
    results["targets"] = evaluate(results["sizes"])
    results["rendered"] = render(results)
    Path(path).write_text(json.dumps(results, indent=2, default=str))
    return results["rendered"]


if __name__ == "__main__":
    sys.exit(main())
