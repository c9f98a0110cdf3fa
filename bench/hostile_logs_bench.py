"""Peak memory and time of `ingest-logs` on hostile logs: a file of one line without a
newline, and a small gzip that inflates to newlines only. Each input is made in a temporary directory and
ingested by the console script in a child process; its peak RSS comes from `getrusage(RUSAGE_CHILDREN)`.

    python bench/hostile_logs_bench.py --size 1GiB        # the 1 GiB case (takes minutes to make the inputs)
    python bench/hostile_logs_bench.py --size 64MiB       # a quick check that it runs

Bounded means: peak RSS under 1 GiB whatever the line holds, and the gzip stopped once it inflates past the
ratio of pipeline/core/limits.py (the file quarantined, not parsed).
"""

from __future__ import annotations

import argparse
import gzip
import os
import resource
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
BLOCK = 8 << 20
HOST = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"  # any well-formed address: ingest-logs refuses others


def size(text: str) -> int:
    for unit, factor in UNITS.items():
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * factor)
    return int(text)


def line_less(path: Path, n: int) -> None:
    """`n` bytes of one line: log-like text, no newline anywhere."""
    block = (b"INFO 01-02 03:04:05 [x.py:1] " + b"y" * 200) * (BLOCK // 229)
    with open(path, "wb") as fh:
        left = n
        while left > 0:
            fh.write(block[:left])
            left -= len(block[:left])


def newline_gzip(path: Path, n: int) -> None:
    """A gzip member of `n` newlines (about a thousandth of that on disk), written without holding them."""
    zipped = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"\n" * BLOCK
    with open(path, "wb") as fh:
        left = n
        while left > 0:
            fh.write(zipped.compress(block[:left]))
            left -= len(block[:left])
        fh.write(zipped.flush())
    with gzip.open(path, "rb") as check:  # a valid gzip member
        check.read(1)


def measure(args: list[str]) -> tuple[float, int, str]:
    """Wall seconds, peak RSS (bytes) and the last stderr line of one child process."""
    started = time.monotonic()
    done = subprocess.run(args, capture_output=True, text=True)
    elapsed = time.monotonic() - started
    # the largest child so far (KiB): each case runs in a measuring process of its own, with this one child
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    tail = (done.stderr.strip().splitlines() or [""])[-1]
    if done.returncode not in (0, 3):
        raise SystemExit(f"{' '.join(args)}: exit {done.returncode}: {done.stderr}")
    return elapsed, peak * 1024, tail


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="1GiB", help="bytes of the line-less file and of the inflated gzip")
    parser.add_argument("--case", choices=["line-less", "gzip"], help="one case only (used by the parent run)")
    opts = parser.parse_args()
    n = size(opts.size)
    entry = str(Path(sys.executable).with_name("gonka-evidence"))
    if opts.case is None:  # each case in a fresh process: RUSAGE_CHILDREN is a maximum over all children
        for case in ("line-less", "gzip"):
            subprocess.run([sys.executable, __file__, "--size", opts.size, "--case", case], check=True)
        return
    with tempfile.TemporaryDirectory(prefix="hostile-logs-") as tmp:
        root = Path(tmp)
        log = root / ("vllm.log" if opts.case == "line-less" else "vllm.log.gz")
        (line_less if opts.case == "line-less" else newline_gzip)(log, n)
        wall, peak, tail = measure(
            [entry, "ingest-logs", str(log), "--host", HOST, "--kind", "vllm", "--year", "2026", "-w",
             str(root / "w.duckdb")]
        )  # fmt: skip
        on_disk = os.path.getsize(log)
        print(
            f"{opts.case}: {n / (1 << 20):,.0f} MiB ({on_disk / (1 << 20):,.1f} MiB on disk): {wall:.1f} s, "
            f"peak RSS {peak / (1 << 20):,.0f} MiB | {tail}"
        )


if __name__ == "__main__":
    main()
