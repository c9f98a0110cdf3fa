#!/usr/bin/env bash
# The 16-core runs of bench/BENCHMARKS.md on a lent machine whose Python (3.12) lacks the stack.
# Here, once: the wheels it lacks, unpacked and packed as two carries (the 64 MiB limit holds the checkout too):
#   echo /.devkit/ >> .git/info/exclude; mkdir -p .devkit/whl .devkit/site .devkit/p1 .devkit/p2
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
#     --platform manylinux2014_x86_64 -d .devkit/whl polars==2.1.0 polars-runtime-32==2.1.0 duckdb==2.0.1 \
#     adbc-driver-manager==1.13.0 adbc-driver-sqlite==1.13.0 adbc-driver-postgresql==1.13.0 protobuf==7.36.2 \
#     ptars==0.0.25 orjson msgspec dask==2026.8.0 distributed==2026.8.0 tornado tblib zict partd locket
#   for w in .devkit/whl/*.whl; do unzip -q -o "$w" -d .devkit/site; done
#   tar -cf - -C .devkit site/_polars_runtime_32 | xz -9 -T2 > .devkit/p1/polars.tar.xz
#   tar -cf - -C .devkit --exclude=site/_polars_runtime_32 site | xz -6 -T2 > .devkit/p2/rest.tar.xz
# There: `bash bench/device_sweep.sh P x` carrying .devkit/p1, then at once (the machine stays warm 30 s)
# `bash bench/device_sweep.sh A 16,1 [ROWS,...]` carrying .devkit/p2 (A starts with bench/ceiling.py at 16 and
# 8 workers; B: more worker counts, appended; each ROWS: 16 workers again with stage-1 pieces of that many
# diffs, or the default pieces for `default`, into $OUT/pieces-K-ROWS.json for the K-th).
set -uo pipefail
phase=$1; workers=$2; piece_rows=${3:-}
export PYTHONUNBUFFERED=1
for part in .devkit/p1/polars.tar.xz .devkit/p2/rest.tar.xz; do
  if [ -f "$part" ] && [ ! -f "/tmp/$(basename $part).done" ]; then tar -xJf "$part" -C /tmp && touch "/tmp/$(basename $part).done" || exit 8; fi
done
[ "$phase" = P ] && { ls /tmp/site | head -50; lscpu; python3 --version; python3 -c "import google.protobuf as g; print(g.__version__)"; nproc; exit 0; }
export PYTHONPATH=/tmp/site:$PWD
PY=python3
$PY -c 'import polars, duckdb, distributed, adbc_driver_sqlite, pyarrow, os; print("ok", polars.__version__, duckdb.__version__, distributed.__version__, pyarrow.__version__, os.cpu_count())' || exit 9
nproc; free -g | head -2; uptime
mkdir -p bench/data bench/results
if [ "$phase" = A ]; then
  for n in 16 8; do $PY bench/ceiling.py --workers $n --rows 10000000 --out $OUT/ceiling-$n.json | grep -E 'slowdown|ceiling'; done
  t0=$(date +%s)
  [ -f bench/data/gonka_bench_1m/_meta.db ] || $PY bench/scale_copy.py --sizes 1m --layout sqlite --workers 16 2>&1 | tail -1
  $PY -c "
import sys; sys.path[:0] = ['bench', '.']
from pathlib import Path
from bench.network_bench import host_copies_sqlite
print(host_copies_sqlite(Path('bench/data'), '1m', 16)[0])"
  echo "generated and copied in $(( $(date +%s) - t0 )) s"
  $PY bench/run.py --store bench/data/gonka_bench_net_1m/host-0 --steps floor,ingest --output $OUT/single-host.json 2>&1 | tail -9
  [ "$workers" = none ] || $PY bench/network_bench.py --size 1m --hosts 16 --workers "$workers" --buckets 64 --layout sqlite --no-sequential --reuse 2>&1 | tee $OUT/sweepA.log | tail -6
  cp bench/results/network-1m-sqlite.json $OUT/ 2>/dev/null
  run=0
  for rows in ${piece_rows//,/ }; do
    run=$((run + 1)); flag=(--piece-rows "$rows"); [ "$rows" = default ] && flag=()
    $PY bench/network_bench.py --size 1m --hosts 16 --workers 16 --buckets 64 --layout sqlite --no-sequential --reuse \
      "${flag[@]}" --out "$OUT/pieces-$run-$rows.json" 2>&1 | tail -3
  done
else
  $PY bench/network_bench.py --size 1m --hosts 16 --workers "$workers" --buckets 64 --layout sqlite --no-sequential --reuse --append 2>&1 | tee $OUT/sweepB.log | tail -40
  cp bench/results/network-1m-sqlite.json $OUT/ 2>/dev/null
fi
