"""python -m pipeline.samples OUT_DIR [--seed N] [--last-epoch K] [--line NAME] [--no-ledger] [--no-payloads]
[--no-log]: write OUT_DIR/store, OUT_DIR/builds.toml and OUT_DIR/vllm/vllm.log (the focal host's vLLM log)."""

from __future__ import annotations

import argparse
from pathlib import Path

from . import SampleSpec, generate_timeline
from .release_lines import SAMPLE_LINES

# The bundled samples come from the newest line: non-default migration ids and an imported escrow.
BUNDLED_LINE = "snapshot-import"
VLLM_LOG = Path("vllm") / "vllm.log"  # below OUT_DIR


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m pipeline.samples", description=__doc__)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--last-epoch", type=int, default=None, help="epoch the copy is taken in (default: the last)")
    parser.add_argument("--no-ledger", action="store_true", help="leave out the gateway ledger (accounting.db)")
    parser.add_argument(
        "--no-payloads", action="store_true", help="leave out the stored request and response bodies (store/payloads/)"
    )
    parser.add_argument("--no-log", action="store_true", help="leave out the focal host's vLLM log (vllm/vllm.log)")
    parser.add_argument(
        "--line",
        choices=sorted(SAMPLE_LINES),
        default=BUNDLED_LINE,
        help="the writer's release line (migration lists, snapshot format, imports)",
    )
    args = parser.parse_args(argv)
    timeline = generate_timeline(SampleSpec(seed=args.seed))
    last_epoch = timeline.spec.epochs[-1] if args.last_epoch is None else args.last_epoch
    copy = timeline.copy(last_epoch, line=args.line)
    copy.write_sqlite(args.out_dir / "store", ledger=not args.no_ledger, payloads=not args.no_payloads)
    timeline.write_builds_toml(args.out_dir / "builds.toml")
    if not args.no_log:
        from .vllm_log import write_vllm_log

        write_vllm_log(timeline, copy, args.out_dir / VLLM_LOG)
    print(timeline.focal_host)


if __name__ == "__main__":
    main()
