"""The ADBC DB-API modules, imported without pandas.

`adbc_driver_manager.dbapi` imports `pyarrow.dataset` when it is imported, only to recognise
Dataset and Scanner arguments of its bulk ingest (`adbc_ingest`), which this read-only pipeline
never calls; and `pyarrow.dataset` imports pandas, a large share of a no-op `gonka-evidence ingest`
of a PostgreSQL copy (bench/BENCHMARKS.md, "The no-op re-ingest: start-up").

So while a driver module is imported, `pyarrow.dataset` is a placeholder that imports the real
module on its first attribute use (the driver keeps working should it ever look at it). It leaves
`sys.modules` as soon as the driver is imported: `import pyarrow.dataset` anywhere else imports
the real module as usual, and DuckDB, which looks `pyarrow.dataset` up in `sys.modules` to
recognise datasets, never sees the placeholder.
"""

from __future__ import annotations

import importlib
import sys
import types

DATASET = "pyarrow.dataset"


class _ImportedOnUse(types.ModuleType):
    """Stands in for a module until an attribute of it is asked for."""

    def __getattr__(self, name: str):
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), name)


def import_dbapi(module: str) -> types.ModuleType:
    """`import <module>` (e.g. "adbc_driver_postgresql.dbapi") without importing pyarrow.dataset."""
    if module in sys.modules or DATASET in sys.modules:
        return importlib.import_module(module)
    import pyarrow

    placeholder = _ImportedOnUse(DATASET)
    sys.modules[DATASET] = placeholder
    pyarrow.dataset = placeholder  # what `import pyarrow.dataset` binds; the real import replaces it
    try:
        return importlib.import_module(module)
    finally:
        if sys.modules.get(DATASET) is placeholder:
            del sys.modules[DATASET]
