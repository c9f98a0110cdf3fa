"""gonka-evidence: reproducible evidence about Gonka devshard hosts.

The package is library first: `pipeline.api` is the facade, `pipeline.cli` a thin Typer layer over it.
"""

import os

# numpy's OpenBLAS starts a thread per core that busy-waits: on a 2-core host it took ~8% of the CPU
# from the log scanner's threads. Our linear algebra is tiny; set before numpy is first imported
# (a value the user set wins).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

__all__ = ["Evidence", "Warehouse", "__version__", "open_warehouse"]


def __getattr__(name: str):
    """`__version__`, `open_warehouse` and its classes, looked up on first use: `import pipeline`
    (which the console script does before its Ctrl-C handler is in place, see `pipeline.cli.main`)
    imports nothing, and `gonka-evidence --version` loads no Polars, DuckDB or statistics library."""
    if name == "__version__":
        from pipeline.core.version import pipeline_version

        return pipeline_version()
    if name in ("Evidence", "Warehouse", "open_warehouse"):
        from pipeline import api

        return getattr(api, name)
    raise AttributeError(f"module 'pipeline' has no attribute {name!r}")
