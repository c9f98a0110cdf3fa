"""What every command resolves once: the warehouse, the default host and the run configuration.

One precedence for every command and every setting (docs/configuration.md): the argument (an option of the
command line, a keyword of the API), else the environment (``GONKA_EVIDENCE_WAREHOUSE``,
``GONKA_EVIDENCE_HOST``), else the config file (``--config FILE``, else gonka-evidence.toml here), else the
default (./warehouse.duckdb; no host). The bundled samples' focal host is used only on the samples' own
warehouse: one whose every ingested source lies in data-samples/, with no config file in effect.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.core.errors import UserError
from pipeline.core.paths import DATA_SAMPLES_DIR, DEFAULT_WAREHOUSE
from pipeline.jobs.config import DEFAULT_CONFIG_FILE, RunConfig, config_path, load_config

if TYPE_CHECKING:
    import duckdb

WAREHOUSE_ENV, HOST_ENV = "GONKA_EVIDENCE_WAREHOUSE", "GONKA_EVIDENCE_HOST"
# Where a host is set, for the one-line error when none is.
WHERE_HOST = "give --host ADDR, set GONKA_EVIDENCE_HOST, or set host in gonka-evidence.toml (gonka-evidence init)"


class SettingsError(UserError):
    """A setting that cannot be resolved (a config file named but missing, no host where one is needed)."""


@dataclass(frozen=True)
class Settings:
    """The settings of one command, resolved once by `Settings.resolve`; frozen."""

    warehouse: Path
    warehouse_named: bool  # given by argument or environment (it goes into reproducing commands)
    host: str | None  # argument, else environment, else the config's
    config: Path | None  # the config file in effect; None: none (the samples' run configuration)
    warehouse_given: bool = False  # given by argument (not the environment or the config)
    loaded: RunConfig | None = field(default=None, repr=False, compare=False)  # the config file's, as read

    @classmethod
    def resolve(
        cls,
        warehouse: str | Path | None = None,
        *,
        host: str | None = None,
        config: str | Path | None = None,
    ) -> Settings:
        """Argument, else environment, else config file, else default, for the warehouse and the host. Only a
        config file is read here; the samples' run configuration is made when `run` is first asked for."""
        if config is not None and not Path(config).exists():
            raise SettingsError(f"{config}: no such config file")
        file = Path(config) if config is not None else DEFAULT_CONFIG_FILE if DEFAULT_CONFIG_FILE.exists() else None
        loaded = load_config(file) if file is not None else None  # GONKA_EVIDENCE_<KEY> applied over its keys
        env_warehouse = os.environ.get(WAREHOUSE_ENV) or None
        given = warehouse not in (None, "")
        if given:
            path = Path(str(warehouse))
        elif loaded is not None:
            path = loaded.warehouse
        else:  # the environment's expanded as the config's is (`~`), else the default
            path = config_path(Path("."), env_warehouse) if env_warehouse else DEFAULT_WAREHOUSE
        configured = loaded.host if loaded is not None else os.environ.get(HOST_ENV) or None
        return cls(
            warehouse=path,
            warehouse_named=(given or env_warehouse is not None) and path != DEFAULT_WAREHOUSE,
            host=host or configured,
            config=file,
            warehouse_given=given,
            loaded=loaded,
        )

    @cached_property
    def run(self) -> RunConfig:
        """The run configuration (the config file's, else the samples'), environment applied, this warehouse."""
        run = self.loaded if self.loaded is not None else load_config(None)
        if self.warehouse_given and self.warehouse != run.warehouse:
            run.set_by["warehouse"] = "--warehouse"
        run.warehouse = self.warehouse
        return run

    @property
    def samples_host(self) -> str | None:
        """The samples' focal host, when no config file is in effect (None otherwise)."""
        if self.config is not None:
            return None
        from pipeline.jobs.config import sample_config

        return sample_config().host

    def host_for(self, con: duckdb.DuckDBPyConnection | None, what: str) -> str:
        """The host of `what` (a report, a bundle): the resolved one, else the samples' focal host on the
        samples' own warehouse; none is a one-line error naming where to set it."""
        if self.host:
            return self.host
        if con is not None and self.samples_host and is_samples_warehouse(con):
            return self.samples_host
        raise SettingsError(f"{what} needs a host: {WHERE_HOST}")


def is_samples_warehouse(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the warehouse ingested something and every source it ingested lies in the bundled data-samples/."""
    import duckdb

    try:
        rows = con.execute("SELECT DISTINCT source_display FROM ingest_runs").fetchall()
    except duckdb.Error:  # a warehouse without runs yet
        return False
    root = DATA_SAMPLES_DIR.resolve()
    return bool(rows) and all(
        bool(shown) and shown.startswith("/") and Path(shown).resolve().is_relative_to(root) for (shown,) in rows
    )
