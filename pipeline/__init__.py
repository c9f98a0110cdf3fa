"""gonka-evidence: reproducible evidence about Gonka devshard hosts.

The package is library first; `pipeline.cli` is a thin Typer layer over it.
"""

import os
from importlib.metadata import PackageNotFoundError, version

# numpy's OpenBLAS starts a thread per core that busy-waits: on a 2-core host it took ~8% of the CPU
# from the log scanner's threads. Our linear algebra is tiny; set before numpy is first imported
# (a value the user set wins).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

try:
    __version__ = version("gonka-evidence")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+local"

__all__ = ["Evidence", "Warehouse", "__version__", "open_warehouse"]


def __getattr__(name: str):
    """`open_warehouse` and its classes, imported on first use: `import pipeline` (and
    `gonka-evidence --version`) must not load Polars, DuckDB or the statistics libraries."""
    if name in ("Evidence", "Warehouse", "open_warehouse"):
        from pipeline import api

        return getattr(api, name)
    raise AttributeError(f"module 'pipeline' has no attribute {name!r}")
