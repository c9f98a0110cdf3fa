"""`gonka-evidence run`: the scheduled job.

Configuration comes from `--config`, else `gonka-evidence.toml` in the working
directory, else the bundled `data-samples/` (so a fresh checkout runs with no
configuration). Public keys (design.md §4): warehouse, output, host, builds,
finality_lag, [[sources]] with url or path, optional kind and label.
Environment variables GONKA_EVIDENCE_<KEY> override keys.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.paths import DATA_SAMPLES_DIR
from pipeline.sources.base import SourceError

CONFIG_KEYS = ("warehouse", "output", "host", "builds", "finality_lag")


@dataclass
class RunConfig:
    warehouse: Path = Path("warehouse.duckdb")
    output: Path = Path("out")
    host: str | None = None
    builds: Path | None = None
    finality_lag: str = "6h"
    sources: list[dict] = field(default_factory=list)
    origin: str = "data-samples"


def sample_config() -> RunConfig:
    builds = DATA_SAMPLES_DIR / "builds.toml"
    return RunConfig(
        builds=builds if builds.exists() else None,
        host=_focal_host(builds),
        sources=[{"path": str(DATA_SAMPLES_DIR / "store"), "label": "data-samples"}],
    )


def _focal_host(builds: Path) -> str | None:
    """The sample builds file names its focal host in `focal_host` (else its first entry's host)."""
    if not builds.exists():
        return None
    doc = tomllib.loads(builds.read_text())
    return doc.get("focal_host") or next((b.get("host") for b in doc.get("builds", [])), None)


def load_config(path: Path | None) -> RunConfig:
    if path is None:
        default = Path("gonka-evidence.toml")
        if not default.exists():
            return _env_overrides(sample_config())
        path = default
    if not path.exists():
        raise SourceError(f"{path}: no such config file")
    try:
        doc = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise SourceError(f"{path}: not valid TOML ({exc})") from None
    base = path.parent
    unknown = set(doc) - set(CONFIG_KEYS) - {"sources"}
    if unknown:
        raise SourceError(f"{path}: unknown key(s) {', '.join(sorted(unknown))}")
    cfg = RunConfig(origin=str(path))
    if "warehouse" in doc:
        cfg.warehouse = base / doc["warehouse"]
    if "output" in doc:
        cfg.output = base / doc["output"]
    cfg.host = doc.get("host")
    if "builds" in doc:
        cfg.builds = base / doc["builds"]
    cfg.finality_lag = str(doc.get("finality_lag", cfg.finality_lag))
    for s in doc.get("sources", []):
        if "url" not in s and "path" not in s:
            raise SourceError(f"{path}: every [[sources]] entry needs url or path")
        entry = dict(s)
        if "path" in entry:
            entry["path"] = str(base / entry["path"])
        cfg.sources.append(entry)
    return _env_overrides(cfg)


def _env_overrides(cfg: RunConfig) -> RunConfig:
    for key in CONFIG_KEYS:
        value = os.environ.get(f"GONKA_EVIDENCE_{key.upper()}")
        if value:
            setattr(cfg, key, Path(value) if key in ("warehouse", "output", "builds") else value)
    return cfg


def run_job(config_path: Path | None, warehouse: Path | None) -> None:
    from pipeline.builds import load_builds
    from pipeline.console import ingest_progress, out, print_frame, print_ingest_summary
    from pipeline.ingest import ingest_store
    from pipeline.query import named_queries, run_query
    from pipeline.sources import open_store
    from pipeline.warehouse import open_for_write

    cfg = load_config(config_path)
    if warehouse is not None:
        cfg.warehouse = warehouse
    out.print(f"config: {cfg.origin}; warehouse: {cfg.warehouse}")
    con = open_for_write(cfg.warehouse)
    try:
        for source in cfg.sources:
            if source.get("kind") not in (None, "store", "postgres", "sqlite"):
                continue  # log and JSON sources are ingested by their own commands
            store = open_store(source.get("url") or source["path"])
            try:
                with ingest_progress() as progress:
                    summary = ingest_store(con, store, label=source.get("label"), progress=progress)
            finally:
                store.close()
            print_ingest_summary(summary)
        if cfg.builds is not None:
            n = load_builds(con, cfg.builds)
            out.print(f"host_builds: {n} entries from {cfg.builds}")
        print_frame(run_query(con, named_queries()["epoch_summary"].sql, {}), title="per-epoch summary")
        if cfg.host:
            print_host_evidence(con, cfg.host)
    finally:
        con.close()


def print_host_evidence(con, host: str) -> None:
    """The core evidence tables of the configured (or the samples' focal) host, as Markdown."""
    from pipeline.console import out
    from pipeline.evidence import compute
    from pipeline.render import render

    for name in ("epoch-summary", "votes-by-build", "peer-invalidation"):
        command = f"gonka-evidence evidence {name} --host {host}"
        out.print(render(compute(name, con, host=host, command=command), "markdown"), markup=False)
        out.print()
