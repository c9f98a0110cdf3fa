"""The optional compiled extensions (pipeline/native/*.c, built by `pip install` when a C compiler is
present): each has a pure-Python/Polars path that gives the same results, slower."""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def optional_extension(name: str, switch: str) -> ModuleType | None:
    """`pipeline.<name>`, or None when it was not built or the environment variable `switch` is 0."""
    if os.environ.get(switch, "1") == "0":
        return None
    try:
        return importlib.import_module(f"pipeline.{name}")
    except ImportError:  # built without a C compiler
        return None
