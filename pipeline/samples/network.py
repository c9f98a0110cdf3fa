"""A small network: several hosts' copies of one timeline, for the lake (`gonka-evidence network`).

Every host of an escrow's group holds the escrow's diff log, so a host's copy is the escrows in which
it holds a slot. The focal host's copy is written on the `snapshot-import` line and holds one escrow
joined by import (no diffs before the import nonce); the other hosts' copies (line `ha`) hold that
escrow whole. One copy carries a forked diff: the same (escrow, nonce) with other bytes (one byte of a
finish transaction's response hash, which no evidence reads), so the lake must quarantine it while
every host's evidence stays what its own copy gives.

    python -m pipeline.samples.network OUT_DIR [--hosts N] [--seed S]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from pipeline.sources.decode import devshard_pb2 as pb

from . import SampleSpec, generate_timeline
from .host_copy import HostCopy

IMPORT_LINE, FULL_LINE = "snapshot-import", "ha"
# Small on purpose (data-samples/network/ stays a few MB): three epochs of two escrows each.
NETWORK_SPEC = SampleSpec(seed=11, epochs=(1, 2, 3), escrows_per_epoch=2, inferences_per_escrow=70)


@dataclass
class NetworkTruth:
    """What the generator planted: each copy's host and escrows, the import and the fork."""

    copies: dict[str, dict]  # directory name -> {"host": address, "escrows": [...], "line": ...}
    focal_host: str
    imported: list[dict]  # {"epoch_id", "escrow_id", "imported_nonce"} in the focal host's copy
    fork: dict  # {"copy", "escrow_id", "nonce"}


def members(session: dict) -> set[str]:
    return {slot["ValidatorAddress"] for slot in json.loads(session["group_json"])}


def _subset(copy: HostCopy, escrows: set[str]) -> HostCopy:
    tables = {name: [r for r in rows if r.get("escrow_id", None) in escrows] for name, rows in copy.tables.items()}
    return dataclasses.replace(copy, tables=tables, payloads=[], validation_leases=[])


def _forked(txs_proto: bytes) -> bytes | None:
    """The diff with one byte of its first finish transaction's response hash changed (None: no finish)."""
    diff = pb.DiffContent.FromString(txs_proto)
    if diff.SerializeToString(deterministic=True) != txs_proto:
        return None  # re-encoding would change more than the planted byte
    for tx in diff.txs:
        if tx.WhichOneof("tx") == "finish_inference" and tx.finish_inference.response_hash:
            digest = bytearray(tx.finish_inference.response_hash)
            digest[0] ^= 0xFF
            tx.finish_inference.response_hash = bytes(digest)
            return diff.SerializeToString(deterministic=True)
    return None


def write_network(out_dir: Path | str, hosts: int = 4, spec: SampleSpec = NETWORK_SPEC) -> NetworkTruth:
    """`out_dir/<host-n>/`: one SQLite store per host (the focal host first), without ledgers or payloads."""
    out_dir = Path(out_dir)
    timeline = generate_timeline(spec)
    last = spec.epochs[-1]
    imported_copy = timeline.copy(last, line=IMPORT_LINE)
    full_copy = timeline.copy(last, line=FULL_LINE)
    held = {s["escrow_id"]: members(s) for s in full_copy.tables["sessions"]}
    counts = Counter(a for group in held.values() for a in group if a != timeline.focal_host)
    others = [a for a, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))][: max(0, hosts - 1)]
    truth = NetworkTruth(
        copies={},
        focal_host=timeline.focal_host,
        imported=imported_copy.truth.planted["imported"],
        fork={},
    )
    for n, host in enumerate([timeline.focal_host, *others]):
        escrows = {e for e, group in held.items() if host in group}
        focal = host == timeline.focal_host
        copy = _subset(imported_copy if focal else full_copy, escrows)
        name = f"host-{n}"
        if n == 1:  # the forked diff, in the first other host's copy
            for row in copy.tables["diffs"]:
                forked = _forked(row["txs_proto"])
                if forked is not None:
                    copy.tables["diffs"] = [{**r, "txs_proto": forked} if r is row else r for r in copy.tables["diffs"]]
                    truth.fork = {"copy": name, "escrow_id": row["escrow_id"], "nonce": row["nonce"]}
                    break
        copy.write_sqlite(out_dir / name, ledger=False, payloads=False)
        truth.copies[name] = {
            "host": host,
            "escrows": sorted(escrows),
            "line": IMPORT_LINE if focal else FULL_LINE,
        }
    return truth


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m pipeline.samples.network", description=__doc__)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--hosts", type=int, default=4)
    args = parser.parse_args(argv)
    truth = write_network(args.out_dir, args.hosts)
    (args.out_dir / "network.json").write_text(json.dumps(dataclasses.asdict(truth), indent=1) + "\n", encoding="utf-8")
    print(truth.focal_host)


if __name__ == "__main__":
    main()
