"""The benchmark: one command, every measurement side by side in one process run.

    python bench/run.py [--sizes 500k,2m] [--url postgresql://postgres@127.0.0.1:5432] [--regenerate]

Per size (a PostgreSQL copy `gonka_bench_<size>` made by bench/scale_copy.py, generated
here when missing), each step runs in its own child process so its peak RSS
(`os.wait4` → `ru_maxrss` of exactly that child) is comparable across steps:

  floor     psycopg `COPY (SELECT <ingested columns>) TO STDOUT (FORMAT binary)` of the
            tables our ingest reads, bytes discarded (the raw floor)
  flat      our PostgresStore.read (ADBC `fetch_record_batch`, per epoch, conformed)
            streamed into a fresh DuckDB file: flat-table transfer alone
  decode    `decode_diffs` over the diffs batches as they arrive (only the decode is timed)
  dlt       dlt `sql_database` tables (backend="pyarrow", same columns) into DuckDB
  ingest    `ingest_store` into a fresh warehouse, with the time inside reads, decode
            and derive measured by wrapping those functions
  reingest  the same copy again into the same warehouse (nothing changed: a no-op)

Results print as a table and go to bench/results/latest.json. Targets (issue 2,
Performance) are evaluated and reported as pass/fail; the exit code is 0 either way
unless a step crashed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
DATA = BENCH / "data"
RESULTS = BENCH / "results"
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT))

import scale_copy  # noqa: E402

# The tables (logical names) our ingest reads, and the rows counted for "rows/s".
FLAT_TABLES = ("sessions", "diffs", "sealed_inferences", "inference_validation_obs", "sealed_validation_obs")
STEPS = ("floor", "flat", "decode", "dlt", "ingest", "reingest")
TARGETS = {
    "flat_vs_floor": 0.5,  # flat rows/s >= 50% of the COPY floor
    "flat_vs_dlt": 3.0,  # flat rows/s >= 3x dlt
    "decode_tx_per_s": 200_000,
    "reingest_share_2m": 0.05,  # no-op re-ingest of the 2M copy <= 5% of its full ingest
    "peak_rss_bytes": int(1.5 * 2**30),
    "rss_growth": 1.10,  # peak RSS at the largest size <= 110% of the smallest ("not growing with size")
}


# -- steps (run in child processes) -------------------------------------------------------------

def _columns(store, table: str) -> list[str]:
    from pipeline.sources.base import TABLES

    present = store.columns(table, None) or []
    return [f.name for f in TABLES[table].schema if f.name in present]


def step_floor(url: str, size: str) -> dict:
    import psycopg

    from pipeline.sources.postgres_store import PREFIX, PostgresStore

    store = PostgresStore(url)  # only for the physical column list
    cols = {t: _columns(store, t) for t in FLAT_TABLES}
    store.close()
    rows, nbytes, per_table = 0, 0, {}
    started = time.perf_counter()
    with psycopg.connect(url) as con:
        con.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        with con.cursor() as cur:
            for table in FLAT_TABLES:
                select = ", ".join(f'"{c}"' for c in cols[table])
                n = 0
                with cur.copy(f'COPY (SELECT {select} FROM "{PREFIX}{table}") TO STDOUT (FORMAT binary)') as copy:
                    for block in copy:
                        nbytes += len(block)
                    n = cur.rowcount
                per_table[table] = n
                rows += n
        con.rollback()
    elapsed = time.perf_counter() - started
    return {"elapsed_s": elapsed, "rows": rows, "bytes": nbytes, "rows_per_s": rows / elapsed, "per_table": per_table}


def step_flat(url: str, size: str) -> dict:
    import duckdb
    import pyarrow as pa

    from pipeline.sources import open_store
    from pipeline.sources.base import TABLES

    path = DATA / f"flat_{size}.duckdb"
    path.unlink(missing_ok=True)
    started = time.perf_counter()
    store = open_store(url)
    con = duckdb.connect(str(path))
    per_table = {}
    for table in FLAT_TABLES:
        schema = TABLES[table].schema
        con.execute(f"CREATE TABLE {table} AS SELECT * FROM (SELECT 1) WHERE false")  # placeholder, replaced below
        con.execute(f"DROP TABLE {table}")
        created = False
        for epoch_id in store.epochs():
            reader = pa.RecordBatchReader.from_batches(schema, store.read(table, epoch_id))
            con.execute(f"{'INSERT INTO ' + table if created else 'CREATE TABLE ' + table + ' AS'} SELECT * FROM reader")
            created = True
        per_table[table] = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    con.close()
    store.close()
    elapsed = time.perf_counter() - started
    rows = sum(per_table.values())
    return {"elapsed_s": elapsed, "rows": rows, "rows_per_s": rows / elapsed, "per_table": per_table,
            "duckdb_bytes": path.stat().st_size}


def step_decode(url: str, size: str) -> dict:
    from pipeline.decode.txs import decode_diffs
    from pipeline.sources import open_store

    store = open_store(url)
    decode_s, diffs, txs, quarantined = 0.0, 0, 0, 0
    started = time.perf_counter()
    for epoch_id in store.epochs():
        for batch in store.read("diffs", epoch_id):
            t0 = time.perf_counter()
            out = decode_diffs(batch)
            decode_s += time.perf_counter() - t0
            diffs += batch.num_rows
            txs += out.txs.num_rows
            quarantined += len(out.quarantined)
    store.close()
    total = time.perf_counter() - started
    return {"elapsed_s": decode_s, "wall_s": total, "diffs": diffs, "txs": txs, "quarantined": quarantined,
            "tx_per_s": txs / decode_s, "diffs_per_s": diffs / decode_s}


def step_dlt(url: str, size: str) -> dict:
    os.environ.setdefault("RUNTIME__DLTHUB_TELEMETRY", "false")
    os.environ.setdefault("RUNTIME__LOG_LEVEL", "WARNING")
    import dlt
    import duckdb
    from dlt.sources.sql_database import sql_table

    from pipeline.sources.postgres_store import PREFIX, PostgresStore

    store = PostgresStore(url)
    cols = {t: _columns(store, t) for t in FLAT_TABLES}
    store.close()
    work = DATA / f"dlt_{size}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    path = work / "dlt.duckdb"
    sa_url = url.replace("postgresql://", "postgresql+psycopg://", 1)
    started = time.perf_counter()
    resources = [
        sql_table(credentials=sa_url, table=f"{PREFIX}{t}", backend="pyarrow", included_columns=cols[t])
        for t in FLAT_TABLES
    ]
    pipeline = dlt.pipeline(pipeline_name=f"bench_{size}", destination=dlt.destinations.duckdb(str(path)),
                            dataset_name="raw", pipelines_dir=str(work / "pipelines"))
    info = pipeline.run(resources)
    elapsed = time.perf_counter() - started
    con = duckdb.connect(str(path), read_only=True)
    per_table = {t: con.execute(f'SELECT count(*) FROM raw."{PREFIX}{t}"').fetchone()[0] for t in FLAT_TABLES}
    con.close()
    rows = sum(per_table.values())
    return {"elapsed_s": elapsed, "rows": rows, "rows_per_s": rows / elapsed, "per_table": per_table,
            "dlt_version": dlt.__version__, "load_ok": not info.has_failed_jobs}


class _Timer:
    def __init__(self):
        self.seconds = 0.0
        self.calls = 0

    def wrap(self, fn):
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0
                self.calls += 1
        return timed

    def wrap_iter(self, fn):
        def timed(*args, **kwargs):
            it = iter(fn(*args, **kwargs))
            while True:
                t0 = time.perf_counter()
                try:
                    item = next(it)
                except StopIteration:
                    self.seconds += time.perf_counter() - t0
                    return
                self.seconds += time.perf_counter() - t0
                yield item
        return timed


def _ingest(url: str, size: str, fresh: bool) -> dict:
    import pipeline.ingest as ingest_mod
    from pipeline.sources import open_store
    from pipeline.warehouse import open_for_write

    path = DATA / f"warehouse_{size}.duckdb"
    if fresh:
        for p in (path, path.with_name(path.name + ".wal")):
            p.unlink(missing_ok=True)
    timers = {name: _Timer() for name in ("read", "decode", "derive", "value_checks")}
    ingest_mod.decode_diffs = timers["decode"].wrap(ingest_mod.decode_diffs)
    ingest_mod.derive_escrows = timers["derive"].wrap(ingest_mod.derive_escrows)
    ingest_mod._value_checks = timers["value_checks"].wrap(ingest_mod._value_checks)
    profile = os.environ.get("GONKA_BENCH_PROFILE")
    started = time.perf_counter()
    con = open_for_write(path)
    store = open_store(url)
    store.read = timers["read"].wrap_iter(store.read)
    if profile:
        import cProfile

        prof = cProfile.Profile()
        summary = prof.runcall(ingest_mod.ingest_store, con, store)
        prof.dump_stats(profile)
    else:
        summary = ingest_mod.ingest_store(con, store)
    store.close()
    con.close()
    elapsed = time.perf_counter() - started
    rows = summary.rows.get("diffs", 0) + summary.rows.get("sealed_inferences", 0)
    breakdown = {name: t.seconds for name, t in timers.items()}
    breakdown["other (duckdb writes, chunking, bookkeeping)"] = summary.elapsed_s - sum(breakdown.values())
    return {"elapsed_s": elapsed, "ingest_elapsed_s": summary.elapsed_s, "rows": rows,
            "rows_per_s": rows / summary.elapsed_s if summary.elapsed_s else None,
            "summary_rows": summary.rows, "escrows_changed": summary.escrows_changed,
            "quarantined": summary.quarantined, "disagreements": summary.disagreements,
            "breakdown_s": breakdown,
            "decode_share": breakdown["decode"] / summary.elapsed_s if summary.elapsed_s else None,
            "warehouse_bytes": path.stat().st_size}


def step_ingest(url: str, size: str) -> dict:
    return _ingest(url, size, fresh=True)


def step_reingest(url: str, size: str) -> dict:
    return _ingest(url, size, fresh=False)


STEP_FUNCS = {"floor": step_floor, "flat": step_flat, "decode": step_decode, "dlt": step_dlt,
              "ingest": step_ingest, "reingest": step_reingest}


# -- orchestration -------------------------------------------------------------------------------

def run_step(step: str, url: str, size: str, env: dict | None = None) -> dict:
    """Run one step in a child process; its own peak RSS comes from wait4 (ru_maxrss, KiB on Linux)."""
    with tempfile.NamedTemporaryFile(suffix=".json", dir=DATA, delete=False) as tmp:
        out = Path(tmp.name)
    child_env = os.environ | (env or {})
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--step", step, "--size", size,
                             "--url", url, "--out", str(out)], env=child_env)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    try:
        if proc.returncode != 0:
            return {"error": f"exit code {proc.returncode}", "peak_rss_bytes": usage.ru_maxrss * 1024}
        result = json.loads(out.read_text())
    finally:
        out.unlink(missing_ok=True)
    result["peak_rss_bytes"] = usage.ru_maxrss * 1024
    result["cpu_s"] = usage.ru_utime + usage.ru_stime
    return result


def machine() -> dict:
    import adbc_driver_postgresql
    import duckdb
    import google.protobuf
    import polars
    import psycopg
    import pyarrow
    from google.protobuf.internal import api_implementation

    try:
        import dlt

        dlt_version = dlt.__version__
    except ImportError:
        dlt_version = None
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    mem = next(int(line.split()[1]) * 1024 for line in Path("/proc/meminfo").read_text().splitlines()
               if line.startswith("MemTotal"))
    try:
        with psycopg.connect(scale_copy.db_url(scale_copy.DEFAULT_URL, "postgres")) as con:
            pg = con.execute("SHOW server_version").fetchone()[0]
            shared_buffers = con.execute("SHOW shared_buffers").fetchone()[0]
    except Exception:
        pg, shared_buffers = None, None
    return {
        "nproc": os.cpu_count(), "cpu": cpu, "ram_bytes": mem, "python": platform.python_version(),
        "os": platform.platform(), "postgres": pg, "postgres_shared_buffers": shared_buffers,
        "duckdb": duckdb.__version__, "pyarrow": pyarrow.__version__, "polars": polars.__version__,
        "adbc_driver_postgresql": adbc_driver_postgresql.__version__, "psycopg": psycopg.__version__,
        "protobuf": f"{google.protobuf.__version__} ({api_implementation.Type()})", "dlt": dlt_version,
    }


def evaluate(sizes: dict) -> dict:
    """Targets per size and overall, with the measured values next to them."""
    out = {}
    ours = ("flat", "decode", "ingest", "reingest")
    for size, r in sizes.items():
        s = r["steps"]
        t = {}
        if "rows_per_s" in s.get("flat", {}) and "rows_per_s" in s.get("floor", {}):
            ratio = s["flat"]["rows_per_s"] / s["floor"]["rows_per_s"]
            t["flat_vs_floor"] = {"value": ratio, "target": f">= {TARGETS['flat_vs_floor']}", "pass": ratio >= TARGETS["flat_vs_floor"]}
        if "rows_per_s" in s.get("flat", {}) and "rows_per_s" in s.get("dlt", {}):
            ratio = s["flat"]["rows_per_s"] / s["dlt"]["rows_per_s"]
            t["flat_vs_dlt"] = {"value": ratio, "target": f">= {TARGETS['flat_vs_dlt']}", "pass": ratio >= TARGETS["flat_vs_dlt"]}
        if "tx_per_s" in s.get("decode", {}):
            rate = s["decode"]["tx_per_s"]
            t["decode_tx_per_s"] = {"value": rate, "target": f">= {TARGETS['decode_tx_per_s']}", "pass": rate >= TARGETS["decode_tx_per_s"]}
        if "ingest_elapsed_s" in s.get("ingest", {}) and "ingest_elapsed_s" in s.get("reingest", {}):
            share = s["reingest"]["ingest_elapsed_s"] / s["ingest"]["ingest_elapsed_s"]
            entry = {"value": share, "target": f"<= {TARGETS['reingest_share_2m']}", "pass": share <= TARGETS["reingest_share_2m"]}
            if size != "2m":
                entry["note"] = "the target is stated for the 2M copy; shown for reference"
            t["reingest_share"] = entry
        rss = {k: s[k]["peak_rss_bytes"] for k in ours if "peak_rss_bytes" in s.get(k, {})}
        if rss:
            peak = max(rss.values())
            t["peak_rss"] = {"value": peak, "by_step": rss, "target": f"< {TARGETS['peak_rss_bytes']}",
                             "pass": peak < TARGETS["peak_rss_bytes"]}
        out[size] = t
    names = list(sizes)
    if len(names) >= 2:
        small, large = names[0], names[-1]
        growth = {}
        for step in ours:
            a = sizes[small]["steps"].get(step, {}).get("peak_rss_bytes")
            b = sizes[large]["steps"].get(step, {}).get("peak_rss_bytes")
            if a and b:
                growth[step] = b / a
        if growth:
            worst = max(growth.values())
            out["rss_growth"] = {"value": worst, "by_step": growth, "between": [small, large],
                                 "target": f"<= {TARGETS['rss_growth']}", "pass": worst <= TARGETS["rss_growth"]}
    return out


def _mb(n) -> str:
    return f"{n / 2**20:,.0f}" if n else "-"


def render(results: dict) -> str:
    lines = []
    for size, r in results["sizes"].items():
        s = r["steps"]
        floor = s.get("floor", {}).get("rows_per_s")
        dlt_rate = s.get("dlt", {}).get("rows_per_s")
        c = r["copy"]
        lines.append(f"\n## {size}: {c.get('inferences', '?'):,} inferences, {c.get('diffs', '?'):,} diffs, "
                     f"{c.get('txs', '?'):,} txs, {c.get('sealed_rows', '?'):,} sealed rows, "
                     f"{c.get('obs_rows', '?'):,} obs rows, database {_mb(c.get('db_bytes'))} MiB")
        lines.append("| step | rows | seconds | rows/s | vs floor | vs dlt | peak RSS MiB |")
        lines.append("|---|---:|---:|---:|---:|---:|---:|")
        for step in STEPS:
            x = s.get(step)
            if not x:
                continue
            if "error" in x:
                lines.append(f"| {step} | error: {x['error']} | | | | | {_mb(x.get('peak_rss_bytes'))} |")
                continue
            if step == "decode":
                rate = x["tx_per_s"]
                lines.append(f"| decode (txs) | {x['txs']:,} | {x['elapsed_s']:.1f} | {rate:,.0f} tx/s | | | {_mb(x['peak_rss_bytes'])} |")
                continue
            secs = x.get("ingest_elapsed_s", x["elapsed_s"])
            rate = x.get("rows_per_s") or 0
            vs_floor = f"{rate / floor:.2f}×" if floor and rate else ""
            vs_dlt = f"{rate / dlt_rate:.2f}×" if dlt_rate and rate else ""
            label = {"ingest": "ingest (diffs+sealed)", "reingest": "re-ingest (no-op)"}.get(step, step)
            lines.append(f"| {label} | {x['rows']:,} | {secs:.2f} | {rate:,.0f} | {vs_floor} | {vs_dlt} | {_mb(x['peak_rss_bytes'])} |")
        ing = s.get("ingest", {})
        if "breakdown_s" in ing:
            parts = ", ".join(f"{k} {v:.1f}s ({v / ing['ingest_elapsed_s']:.0%})" for k, v in ing["breakdown_s"].items())
            lines.append(f"\ningest time: {parts}")
    lines.append("\n## targets")
    for size, t in results["targets"].items():
        if size == "rss_growth":
            lines.append(f"- peak RSS growth {t['between'][0]}→{t['between'][1]}: worst ×{t['value']:.2f} "
                         f"(target {t['target']}): {'PASS' if t['pass'] else 'FAIL'}")
            continue
        for name, e in t.items():
            value = f"{e['value'] / 2**30:.2f} GiB" if name == "peak_rss" else f"{e['value']:,.3f}" if e["value"] < 100 else f"{e['value']:,.0f}"
            note = f" ({e['note']})" if "note" in e else ""
            lines.append(f"- {size} {name}: {value} (target {e['target']}): {'PASS' if e['pass'] else 'FAIL'}{note}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="gonka-evidence ingest benchmark (see bench/BENCHMARKS.md)")
    parser.add_argument("--sizes", default="500k,2m")
    parser.add_argument("--url", default=scale_copy.DEFAULT_URL, help="PostgreSQL server (database part replaced)")
    parser.add_argument("--steps", default=",".join(STEPS), help="subset of: " + ",".join(STEPS))
    parser.add_argument("--regenerate", action="store_true", help="re-create the copies even when present")
    parser.add_argument("--output", default=str(RESULTS / "latest.json"))
    parser.add_argument("--step", help=argparse.SUPPRESS)
    parser.add_argument("--size", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.step:  # child process: one measured step
        result = STEP_FUNCS[args.step](args.url, args.size)
        Path(args.out).write_text(json.dumps(result, default=str))
        return 0

    DATA.mkdir(parents=True, exist_ok=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    steps = [s for s in args.steps.split(",") if s]
    results = {"started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": machine(),
               "command": " ".join([Path(sys.executable).name, "bench/run.py", *(argv or sys.argv[1:])]),
               "targets_spec": TARGETS, "sizes": {}}
    for size in [s.strip() for s in args.sizes.split(",") if s.strip()]:
        dbname = f"gonka_bench_{size}"
        copy_info = None
        if args.regenerate or not scale_copy.exists(size, args.url):
            print(f"[{size}] generating {dbname} …", flush=True)
            copy_info = scale_copy.generate(size, args.url)
        url = scale_copy.db_url(args.url, dbname)
        copy_info = copy_info or copy_stats(url)
        copy_info["database"] = dbname
        print(f"[{size}] copy: {json.dumps(copy_info)}", flush=True)
        run_step("floor", url, size)  # warm-up: the OS page cache holds the copy for every step alike
        entry = {"copy": copy_info, "steps": {}}
        for step in steps:
            print(f"[{size}] {step} …", flush=True)
            r = run_step(step, url, size)
            entry["steps"][step] = r
            brief = {k: r[k] for k in ("elapsed_s", "ingest_elapsed_s", "rows", "rows_per_s", "tx_per_s",
                                       "peak_rss_bytes", "error") if k in r}
            print(f"[{size}] {step}: {json.dumps(brief)}", flush=True)
        results["sizes"][size] = entry
        results["targets"] = evaluate(results["sizes"])
        Path(args.output).write_text(json.dumps(results, indent=2, default=str))  # partial results survive
    results["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    results["targets"] = evaluate(results["sizes"])
    Path(args.output).write_text(json.dumps(results, indent=2, default=str))
    print(render(results))
    print(f"\nwritten: {args.output}")
    return 1 if any("error" in s for r in results["sizes"].values() for s in r["steps"].values()) else 0


def copy_stats(url: str) -> dict:
    import psycopg

    with psycopg.connect(url) as con:
        q = lambda s: con.execute(s).fetchone()[0]  # noqa: E731
        return {
            "escrows": q("SELECT count(*) FROM devshard_sessions"),
            "inferences": q("SELECT count(*) FROM devshard_diffs WHERE get_byte(txs_proto, 2) = 10"),
            "diffs": q("SELECT count(*) FROM devshard_diffs"),
            "sealed_rows": q("SELECT count(*) FROM devshard_sealed_inferences"),
            "obs_rows": q("SELECT (SELECT count(*) FROM devshard_sealed_validation_obs) + "
                          "(SELECT count(*) FROM devshard_inference_validation_obs)"),
            "db_bytes": q("SELECT pg_database_size(current_database())"),
        }


if __name__ == "__main__":
    sys.exit(main())
