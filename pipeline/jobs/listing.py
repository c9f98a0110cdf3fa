"""What the facade lists and checks besides its commands (`pipeline.api` re-exports every name here): the
evidence tables, the warehouse's schema, the source kinds, the named queries and their parameters, the
checks of paths in their roles, the one-line errors, the lines an ingest summary adds, `init`'s config.
Each looks its module up on first use, so importing `pipeline.api` stays cheap."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.core.roles import Role
from pipeline.output.query.formats import QueryFormat

if TYPE_CHECKING:
    import polars as pl

    from pipeline.evidence.spec import EvidenceSpec, Option
    from pipeline.output.query.execute import NamedQuery


def rule_set_lines(choices: list[dict], every: bool = False) -> list[str]:
    """The ingest summary's lines on the replay rule sets its escrows follow (pipeline/ingest/derive.py)."""
    from pipeline.ingest.derive import rule_set_lines as lines

    return lines(choices, every)


def check_path(path: Path, role: Role, what: str = "", noun: str | None = None) -> None:
    """PathError unless `path` can play `role` (pipeline/core/roles.py); never blocks. `what` names the
    option in the message."""
    from pipeline.output.guards.roles import check_path

    check_path(path, role, what, noun)


def check_address(text: str, what: str) -> str:
    """`text` as a gonka1… address in lower case; a one-line UserError naming `what` when malformed."""
    from pipeline.warehouse.held import well_formed_address

    return well_formed_address(text, what)


def check_outputs(
    outputs: dict[str, Path],
    *,
    inputs: Iterable[Path] = (),
    warehouse: Path | None = None,
    warehouse_option: str | None = None,
) -> None:
    """PathError when an output is, holds or lies inside an input, the warehouse or one of its sources."""
    from pipeline.output.guards.roles import check_outputs

    check_outputs(outputs, inputs=inputs, warehouse=warehouse, warehouse_option=warehouse_option)


def init_config(
    host: str,
    *,
    config: str | Path = "gonka-evidence.toml",
    sources: Iterable[str] = (),
    vllm: str | None = None,
    builds: str | None = None,
) -> Path:
    """`gonka-evidence init`: write a commented run configuration for `host` to `config` (never over an
    existing file); see `pipeline.jobs.init`."""
    from pipeline.jobs.init import write_config

    return write_config(Path(config), host, sources=list(sources), vllm=vllm, builds=builds)


def evidence_tables() -> dict[str, EvidenceSpec]:
    """Every evidence table, name → spec (columns, options, summary), in report order."""
    from pipeline.evidence import EVIDENCE

    return EVIDENCE


def evidence_options() -> dict[str, tuple[Option, list[str]]]:
    """Every table option once (``--by-escrow``, …), with the tables that accept it."""
    from pipeline.evidence.registry import shared_options

    return shared_options(evidence_tables())


def evidence_reference() -> str:
    """Every evidence table described from its spec: summary, options, columns and their definitions
    (Markdown; docs/evidence.md is this text)."""
    from pipeline.evidence.catalogue import reference

    return reference(evidence_tables())


def schema() -> tuple[pl.DataFrame, pl.DataFrame]:
    """The public views and commented tables of a new warehouse, (name, kind, comment), and their columns,
    (name, column_name, data_type): what docs/schema.md lists, from the views' ``COMMENT ON``."""
    from pipeline.core.paths import sql_text
    from pipeline.warehouse.database import fetch_frame, open_for_write

    con = open_for_write(":memory:")
    try:
        return fetch_frame(con, sql_text("warehouse/catalog/relations.sql")), fetch_frame(
            con, sql_text("warehouse/catalog/columns.sql")
        )
    finally:
        con.close()


def source_kinds() -> list[dict[str, Any]]:
    """Every kind of `[[sources]]` entry: name, summary, keys, tables it fills, whether it is a log
    kind, and how an entry without `kind` is recognised (docs/source-kinds.md lists them)."""
    from pipeline.ingest.kinds import describe_kinds

    return describe_kinds()


def log_kind_help() -> str:
    """The log kinds `ingest-logs --kind` accepts, as its help text says them."""
    from pipeline.ingest.kinds import log_kind_help

    return log_kind_help()


def named_queries(*, required: bool = False) -> dict[str, NamedQuery]:
    """The named queries of ``sql/queries/`` (``gonka-evidence query --list``); with `required`, none
    found is an error (an incomplete installation)."""
    from pipeline.output.query.execute import QUERIES_DIR, QueryError, named_queries

    queries = named_queries()
    if required and not queries:
        raise QueryError(
            f"{QUERIES_DIR}: no named queries found (an incomplete installation? reinstall gonka-evidence)"
        )
    return queries


def resolve_sql(sql: str | None, file: Path | None = None) -> str:
    """The SQL of `sql` (text, or the name of a named query) or of `file`."""
    from pipeline.output.query.execute import resolve_sql

    return resolve_sql(sql, file)


def query_output_format(fmt: QueryFormat | None, output: str | Path | None) -> QueryFormat:
    """The format `query` writes: ``fmt``, else the one ``output``'s extension names, else the table;
    a ``fmt`` the extension contradicts raises QueryError."""
    from pipeline.output.query.execute import output_format

    return output_format(fmt, Path(output) if output is not None else None)


def parse_params(items: list[str]) -> dict[str, str]:
    """``["k=v", …]`` as query parameters (``$k``)."""
    from pipeline.output.query.execute import parse_params

    return parse_params(items)


def user_errors() -> tuple[type[Exception], ...]:
    """The library's errors that mean the input or the request is wrong (the CLI prints them as one
    line, exit code 1): `UserError`, the root every one-line refusal derives from (pipeline/core/errors.py)."""
    from pipeline.core.errors import UserError

    return (UserError,)


def unrecognised_warnings(summary: Any) -> list[str]:
    """The warning for each log file of a log ingest in which nothing was recognised as its kind (said
    alike by `ingest-logs` and `run`)."""
    from pipeline.ingest.logs import unrecognised_warnings as warnings

    return warnings(summary)


def user_error(exc: Exception) -> Exception | None:
    """The one-line error the CLI prints for `exc`: itself when it is one of `user_errors()`, DuckDB
    running out of memory as an OutOfMemory naming the variable to raise; None for anything else (a bug)."""
    from pipeline.warehouse.database import out_of_memory, ran_out_of_memory

    if isinstance(exc, user_errors()):
        return exc
    return out_of_memory("the command") if ran_out_of_memory(exc) else None
