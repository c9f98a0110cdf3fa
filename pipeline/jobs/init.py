"""`gonka-evidence init`: a commented run configuration for one host, the first step of docs/quickstart.md.

The file is the `run` configuration (`pipeline.jobs.config`, docs/configuration.md): the host's address
(a well-formed ``gonka1…`` bech32 address), its sources (store directories, PostgreSQL URLs, a vLLM log
directory) and its build timeline, with a comment on every line and commented placeholders for what was
not given. An existing file is never overwritten.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from pipeline.core.address import malformed
from pipeline.ingest import kinds
from pipeline.output.guards.safety import OutputError
from pipeline.sources.errors import SourceError


def config_text(
    host: str,
    *,
    sources: Sequence[str] = (),
    vllm: str | None = None,
    builds: str | None = None,
    base: Path = Path("."),
) -> str:
    """The configuration file for ``host``; paths are written relative to ``base`` (the file's directory),
    as the loader reads them, and a PostgreSQL URL as given."""
    if refusal := malformed("--host", host):
        raise SourceError(refusal)
    lines = [
        "# gonka-evidence run configuration, written by `gonka-evidence init` (docs/configuration.md).",
        "# `gonka-evidence run --config FILE` ingests what is new in every source, reloads `builds` and writes",
        "# a report for every closed epoch. Relative paths are relative to this file.",
        "",
        f"host         = {_string(host)}   # your host's address: the reports are about it",
        'warehouse    = "warehouse.duckdb"   # the DuckDB warehouse (created on the first run)',
        'output       = "out"                # reports go to out/epoch-N/',
    ]
    if builds is not None:
        lines.append(f"builds       = {_string(_relative(builds, base))}   # your build timeline, reloaded every run")
    else:
        lines += [
            '# builds     = "builds.toml"        # your build timeline (which build you ran from when); every',
            "#                                    # per-build number rests on it: `gonka-evidence builds infer",
            "#                                    # --out builds.toml` proposes one from the vLLM logs",
        ]
    lines += [
        'finality_lag = "6h"                 # an epoch with an unsettled escrow closes this long after',
        "                                    # its last settlement",
    ]
    for source in sources:
        lines += ["", *_source(source, base)]
    if vllm is not None:
        lines += [
            "",
            "[[sources]]",
            f"path  = {_string(_relative(vllm, base))}   # your vLLM server logs (a directory or files; .gz too)",
            'kind  = "vllm"                      # log kinds must be given; the logs are the host\'s above',
            "# year = 2026                       # vLLM lines print no year: the year of the logs' first lines",
            '# timezone = "UTC"                  # the zone of the logs\' local times',
        ]
    if not sources:
        lines += [
            "",
            "# Your devshard database copies (a safe read-only copy, never the live database: docs/quickstart.md):",
            "# [[sources]]",
            '# path  = "copies/store"             # a SQLite store directory (_meta.db + epoch_<N>.db)',
            "# [[sources]]",
            '# url   = "postgresql://reader@db-copy/devshard"   # or "postgres" for libpq variables / .pgpass',
        ]
    return "\n".join(lines) + "\n"


def write_config(
    path: Path,
    host: str,
    *,
    sources: Sequence[str] = (),
    vllm: str | None = None,
    builds: str | None = None,
) -> Path:
    """Write the configuration for ``host`` to ``path``; an existing file (or anything at that path) is
    refused, never overwritten."""
    path = Path(path)
    text = config_text(host, sources=sources, vllm=vllm, builds=builds, base=path.parent)
    try:
        with open(path, "x", encoding="utf-8") as f:  # "x": fails if the path exists, with no race
            f.write(text)
    except FileExistsError:
        raise OutputError(
            f"{path} already exists: init never overwrites a configuration (give --config NEW.toml)"
        ) from None
    except OSError as exc:
        raise OutputError(f"{path}: cannot write the configuration there ({exc.strerror or exc})") from None
    return path


def _source(source: str, base: Path) -> list[str]:
    """A [[sources]] entry for a store directory or a PostgreSQL URL (``postgres``: libpq's variables)."""
    if source == "postgres" or source.startswith(("postgresql://", "postgres://")):
        kind = kinds.kind_of({"url": source})
        if kind is None:
            raise SourceError(f"--source {source}: not a PostgreSQL URL")
        return [
            "[[sources]]",
            f"url   = {_string(source)}   # a PostgreSQL copy; keep its password in .pgpass, not here",
        ]
    if not Path(source).exists():
        raise SourceError(f"--source {source}: no such file or directory")
    kind = kinds.kind_of({"path": source})
    if kind is None:
        raise SourceError(
            f"--source {source}: cannot tell what this source is (a store directory holds _meta.db and epoch_<N>.db)"
        )
    return [
        "[[sources]]",
        f"path  = {_string(_relative(source, base))}   # a copy of your devshard database",
        f"kind  = {_string(kind.name)}   # see docs/source-kinds.md",
    ]


def _relative(path: str, base: Path) -> str:
    """``path`` as the config file at ``base`` must name it: an absolute path as given, a relative one (to the
    working directory) made relative to ``base``."""
    if os.path.isabs(path):
        return path
    return os.path.relpath(os.path.abspath(path), os.path.abspath(base))


def _string(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")  # TOML also refuses a raw DEL
