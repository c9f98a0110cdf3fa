"""The Python API: open the warehouse, get evidence tables and query results as Polars frames.

    from pipeline import open_warehouse

    with open_warehouse() as wh:              # the warehouse the CLI would use, read-only
        ev = wh.evidence("peer-invalidation", host="gonka1…", epoch=3)
        ev.frame, ev.stats, ev.provenance     # Polars rows, statistics, provenance footer
        print(ev.to_markdown())
        wh.query("SELECT status, count(*) AS n FROM inferences WHERE epoch_id = $epoch GROUP BY ALL", epoch=3)

The `evidence` and `query` commands are thin layers over this module, so what a notebook
computes is what the command line prints. The warehouse is opened in the same sandbox as
`query`: read-only, and DuckDB locked so that SQL cannot reach files, the network or
extensions, nor change settings.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.core.paths import DEFAULT_WAREHOUSE

if TYPE_CHECKING:  # importing `pipeline` stays cheap: the engines load when a warehouse opens
    import duckdb
    import polars as pl

    from pipeline.evidence import EvidenceResult
    from pipeline.output.query import RenderedQuery
    from pipeline.output.query_format import QueryFormat

WAREHOUSE_ENV, HOST_ENV = "GONKA_EVIDENCE_WAREHOUSE", "GONKA_EVIDENCE_HOST"


def config_defaults(config: Path | None = None) -> tuple[str | None, Path]:
    """The host and warehouse used when none is given: those of the config file (`config`, else
    gonka-evidence.toml here), else no host and ./warehouse.duckdb. Unlike `run`, the bundled
    samples' host is never assumed."""
    from pipeline.jobs.config import DEFAULT_CONFIG_FILE, load_config
    from pipeline.sources.store.base import SourceError

    if config is not None and not Path(config).exists():
        raise SourceError(f"{config}: no such config file")
    if config is None and not DEFAULT_CONFIG_FILE.exists():
        return None, DEFAULT_WAREHOUSE
    cfg = load_config(Path(config) if config is not None else DEFAULT_CONFIG_FILE)
    return cfg.host, cfg.warehouse


def open_warehouse(
    path: str | Path | None = None, *, host: str | None = None, config: str | Path | None = None
) -> Warehouse:
    """The warehouse at `path`, read-only and sandboxed. Without `path`, the one the CLI resolves:
    ``GONKA_EVIDENCE_WAREHOUSE``, else the config's warehouse (`config`, else gonka-evidence.toml
    here), else ./warehouse.duckdb. `host` is the default host of `evidence`; without it,
    ``GONKA_EVIDENCE_HOST``, else the config's host, looked up when first needed."""
    from pipeline.warehouse.database import open_sandboxed

    config = Path(config) if config is not None else None
    given = path or os.environ.get(WAREHOUSE_ENV) or None
    path = Path(given) if given else config_defaults(config)[1]
    return Warehouse(path, open_sandboxed(path), host, config, named=given is not None and path != DEFAULT_WAREHOUSE)


@dataclass
class Evidence:
    """One evidence table: rows, statistics, provenance, notes; renders in every CLI format."""

    result: EvidenceResult

    @property
    def name(self) -> str:
        return self.result.evidence

    @property
    def title(self) -> str:
        return self.result.title

    @property
    def frame(self) -> pl.DataFrame:
        return self.result.rows

    @property
    def stats(self) -> dict[str, Any]:
        return self.result.stats

    @property
    def provenance(self):
        return self.result.provenance

    @property
    def notes(self) -> list[str]:
        return self.result.notes

    def render(self, fmt: str) -> str:
        """The table as the `evidence` command prints it with ``--format fmt``."""
        from pipeline.output.render import render

        return render(self.result, fmt)

    def to_markdown(self) -> str:
        return self.render("markdown")

    def to_json(self) -> str:
        return self.render("json")

    def to_csv(self) -> str:
        return self.render("csv")

    def _repr_markdown_(self) -> str:  # Jupyter shows the Markdown table
        return self.to_markdown()


class Warehouse:
    """A read-only, sandboxed warehouse connection; close it, or use it as a context manager."""

    def __init__(
        self,
        path: Path,
        con: duckdb.DuckDBPyConnection,
        host: str | None = None,
        config: Path | None = None,
        *,
        named: bool = False,
    ):
        self.path, self._con, self._host, self._config = path, con, host, config
        self._named = named  # a warehouse given by name goes into the reproducing commands

    @cached_property
    def host(self) -> str | None:
        """The default host of `evidence`: the one given, else GONKA_EVIDENCE_HOST, else the config's."""
        return self._host or os.environ.get(HOST_ENV) or config_defaults(self._config)[0]

    def evidence(
        self,
        name: str,
        host: str | None = None,
        *,
        epoch: int | None = None,
        since: Any = None,
        until: Any = None,
        command: str | None = None,
        **options: Any,
    ) -> Evidence:
        """The evidence table `name` (see `pipeline.evidence.EVIDENCE`) for `host` (default: the
        warehouse's host) over all data, one `epoch`, or ``[since, until)``; other keywords are the
        table's options (``by_escrow=True``, ``compare=2``, …). `command`, the command line that
        reproduces the table in its provenance, is derived from the arguments when not given."""
        from pipeline.evidence import compute

        host = host or self.host
        if command is None:
            command = self._command(name, host, epoch, since, until, options)
        return Evidence(
            compute(name, self._con, host=host, epoch=epoch, since=since, until=until, command=command, **options)
        )

    def query(self, sql: str, **params: Any) -> pl.DataFrame:
        """The result of `sql` (SQL text or a named query of ``gonka-evidence query --list``) with
        ``$name`` bound to ``params``, as a Polars frame."""
        from pipeline.output.query import resolve_sql, run_query

        return run_query(self._con, resolve_sql(sql, None), params)

    def render_query(
        self, sql: str, params: dict[str, Any], fmt: QueryFormat, *, vertical: bool = False, width: int | None = None
    ) -> RenderedQuery:
        """`sql` rendered exactly as the `query` command prints it (see `pipeline.output.query.render_query`)."""
        from pipeline.output.query import render_query

        return render_query(self._con, sql, params, fmt, vertical=vertical, width=width)

    def _command(self, name: str, host: str | None, epoch, since, until, options: dict[str, Any]) -> str:
        from pipeline.evidence import reproducing_command

        return reproducing_command(
            name,
            host,
            epoch=epoch,
            since=since,
            until=until,
            warehouse=str(self.path) if self._named else None,
            **options,
        )

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> Warehouse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Warehouse({str(self.path)!r}, host={self.host!r})"
