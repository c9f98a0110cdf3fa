"""Where the project's non-Python assets live: SQL files, report templates and the bundled samples.

The repository keeps them in its top-level folders ``sql/``, ``reports/`` and ``data-samples/``.
A wheel carries the same folders inside the package, as ``pipeline/_data/<folder>`` (``setup.py``
copies them there when it builds), so an installed `gonka-evidence` needs no checkout. A checkout
(an editable install, or the source tree on ``sys.path``) has no ``_data`` and reads the top-level
folders in place. Both are found through `importlib.resources`, which sees the package wherever it
was imported from.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

BUNDLED_DATA = "_data"  # the package folder a wheel carries the assets in (see setup.py)
ASSET_FOLDERS = ("sql", "reports", "data-samples")


def _asset_root() -> Path:
    package = Path(str(files("pipeline")))  # a wheel is installed as files, never imported from a zip
    bundled = package / BUNDLED_DATA
    return bundled if bundled.is_dir() else package.parent


ASSET_ROOT = _asset_root()
SQL_DIR = ASSET_ROOT / "sql"
REPORTS_DIR = ASSET_ROOT / "reports"
DATA_SAMPLES_DIR = ASSET_ROOT / "data-samples"

# The warehouse every command and the config use when none is named (relative to the working directory).
DEFAULT_WAREHOUSE = Path("warehouse.duckdb")


def sql_text(relative: str) -> str:
    """The text of one SQL file below `sql/`, e.g. ``sql_text("queries/epoch_summary.sql")``."""
    return SQL_DIR.joinpath(*relative.split("/")).read_text(encoding="utf-8")
