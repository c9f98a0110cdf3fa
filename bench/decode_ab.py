"""Interleaved A/B of the diff decode alone (`decode_diffs`) over a bench copy's diffs, in CPU seconds.

    python bench/decode_ab.py ROUNDS NAME=SOURCE_TREE ... [--size 500k]

The copy's diff batches (as the ingest reads them, `store.read("diffs", epoch)`) are written once to
bench/data/diffs_<size>.arrow; every run reads that file into memory first, untimed. Each round runs every
side once, the order flipping every round, in a child process with PYTHONPATH=SOURCE_TREE (an export of
an older commit: `git archive COMMIT | tar -x -C /tmp/before`): CPU seconds of the process (every thread)
and wall seconds inside `decode_diffs`. The first round's children also write what they decoded, and the
sides are compared table by table: a side whose rows differ from the first side's is reported.
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
DATA = ROOT / "bench" / "data"

CHILD = """
import json, sys, time
from pathlib import Path
import pyarrow as pa
from pipeline.sources.decode.txs import decode_diffs
batches = list(pa.ipc.open_stream(sys.argv[1]))
out = [None] * len(batches)
cpu, wall = time.process_time(), time.perf_counter()
for i, batch in enumerate(batches):
    out[i] = decode_diffs(batch)
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
if len(sys.argv) > 2:  # what it decoded, for the comparison
    keep = Path(sys.argv[2])
    for name in ("txs", "diffs", "held"):
        table = pa.concat_tables([getattr(o, name) for o in out])
        with pa.OSFile(str(keep / f"{name}.arrow"), "wb") as f, pa.ipc.new_file(f, table.schema) as w:
            w.write_table(table)
    (keep / "quarantined.json").write_text(json.dumps([q for o in out for q in o.quarantined]))
print(json.dumps({"cpu_s": cpu, "wall_s": wall, "txs": sum(o.txs.num_rows for o in out),
                  "quarantined": sum(len(o.quarantined) for o in out)}))
"""


def dump(size: str) -> Path:
    """bench/data/diffs_<size>.arrow: the copy's diff batches, written once."""
    path = DATA / f"diffs_{size}.arrow"
    if path.exists():
        return path
    sys.path.insert(0, str(ROOT))
    import pyarrow as pa

    from pipeline.sources.store import open_store

    server = os.environ.get("GONKA_BENCH_PG", "postgresql://postgres@127.0.0.1:5432")
    store = open_store(f"{server}/gonka_bench_{size}")
    DATA.mkdir(parents=True, exist_ok=True)
    writer = None
    with pa.OSFile(str(path), "wb") as sink:
        for epoch_id in store.epochs():
            for batch in store.read("diffs", epoch_id):
                writer = writer or pa.ipc.new_stream(sink, batch.schema)
                writer.write(batch)
        if writer:
            writer.close()
    store.close()
    return path


def same(a: Path, b: Path) -> list[str]:
    """The outputs that differ between two sides' decodes."""
    import pyarrow as pa

    differ = [
        name
        for name in ("txs", "diffs", "held")
        if not pa.ipc.open_file(str(a / f"{name}.arrow"))
        .read_all()
        .equals(pa.ipc.open_file(str(b / f"{name}.arrow")).read_all())
    ]
    if (a / "quarantined.json").read_text() != (b / "quarantined.json").read_text():
        differ.append("quarantined")
    return differ


def main() -> int:
    args = sys.argv[1:]
    size = "500k"
    if "--size" in args:
        i = args.index("--size")
        size, args = args[i + 1], args[:i] + args[i + 2 :]
    rounds, sides = int(args[0]), [a.split("=", 1) for a in args[1:]]
    data = dump(size)
    runs: dict[str, list[dict]] = {name: [] for name, _ in sides}
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "decode.py"
        script.write_text(CHILD)
        for r in range(rounds):
            for name, tree in sides if r % 2 == 0 else sides[::-1]:
                keep = [] if r else [str(Path(tmp) / name)]
                for k in keep:
                    Path(k).mkdir()
                out = subprocess.run(
                    [sys.executable, str(script), str(data), *keep],
                    env={**os.environ, "PYTHONPATH": tree},
                    capture_output=True,
                    text=True,
                    check=True,
                )
                runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(name, runs[name][-1], flush=True)
        first = sides[0][0]
        for name, _ in sides[1:]:
            differ = same(Path(tmp) / first, Path(tmp) / name)
            print(f"{name} vs {first}: {'same rows' if not differ else 'DIFFERENT ' + ', '.join(differ)}")
    for name, v in runs.items():
        cpu = statistics.median(x["cpu_s"] for x in v)
        each = ", ".join(f"{x['cpu_s']:.2f}" for x in v)
        ratio = statistics.median(a["cpu_s"] / b["cpu_s"] for a, b in zip(runs[first], v, strict=True))
        print(
            f"{name}: CPU median {cpu:.2f} s (runs {each}), wall median "
            f"{statistics.median(x['wall_s'] for x in v):.2f} s, {first}/{name} CPU x{ratio:.2f} (median of the pairs)"
        )
    print(f"load average {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
