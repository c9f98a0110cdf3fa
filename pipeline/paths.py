"""Where the project's non-Python assets live (SQL files, report templates, samples)."""

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SQL_DIR = PROJECT_ROOT / "sql"
REPORTS_DIR = PROJECT_ROOT / "reports"
DATA_SAMPLES_DIR = PROJECT_ROOT / "data-samples"


def sql_text(relative: str) -> str:
    """The text of one SQL file below `sql/`, e.g. ``sql_text("queries/epoch_summary.sql")``."""
    return (SQL_DIR / relative).read_text()
