"""The host build timeline (`builds.toml`): which build each host ran from when.

Each entry lasts until the same host's next entry. Loading a file
replaces the whole timeline in one transaction; the public views pick it up at
once through their as-of joins.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import polars as pl

from pipeline.core.errors import UserError
from pipeline.core.events import Listener, listening, warn
from pipeline.core.paths import sql_text
from pipeline.core.text import label_refusal
from pipeline.core.tomlfile import read_toml, require_string, toml_type
from pipeline.ingest.derive import attribute_builds
from pipeline.warehouse.database import fetch_frame, transaction
from pipeline.warehouse.held import UnheldValue, check_value


class BuildsError(UserError):
    """A builds file that cannot be used; one-line message."""


DOCUMENT_KEYS = ("builds", "focal_host", "devshard_versions")  # the file's own keys
ENTRY_KEYS = ("host", "label", "since")  # the keys of a [[builds]] entry, all required
# A timeline of more builds than any host runs is refused in one line: every build is a row (and a band)
# of every per-build table and chart.
MAX_ENTRIES = 1_000


def read_builds_document(path: Path) -> dict:
    """The parsed file, checked: a non-empty [[builds]] array of tables whose host and label are
    strings and whose since is a time; `focal_host`, when given, a string; [[devshard_versions]], when given,
    tables of a version and its verdict rule set (strings)."""
    doc = read_toml(path, BuildsError)
    entries = doc.get("builds")
    if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
        raise BuildsError(f"{path}: no [[builds]] entries")
    if "focal_host" in doc:
        require_string(doc["focal_host"], BuildsError, f"{path}: focal_host")
        doc["focal_host"] = _host(doc["focal_host"], f"{path}: focal_host")
    if len(entries) > MAX_ENTRIES:
        raise BuildsError(f"{path}: {len(entries):,} [[builds]] entries; at most {MAX_ENTRIES:,} are taken")
    if unknown := sorted(set(doc) - set(DOCUMENT_KEYS)):
        raise BuildsError(f"{path}: unknown key(s) {', '.join(unknown)} (keys: {', '.join(DOCUMENT_KEYS)})")
    for i, entry in enumerate(entries, 1):
        if unknown := sorted(set(entry) - set(ENTRY_KEYS)):  # a typo (`lable`, `until`) is never silently ignored
            raise BuildsError(
                f"{path}: entry {i} has unknown key(s) {', '.join(unknown)} (keys: {', '.join(ENTRY_KEYS)})"
            )
        missing = [k for k in ENTRY_KEYS if k not in entry]
        if missing:
            raise BuildsError(f"{path}: entry {i} lacks {', '.join(missing)}")
        for key in ("host", "label"):
            require_string(entry[key], BuildsError, f"{path}: entry {i}: {key}")
        if refusal := label_refusal(entry["label"], f"{path}: entry {i}"):
            raise BuildsError(refusal)
    for i, entry in enumerate(_version_entries(doc, path), 1):
        if unknown := sorted(set(entry) - {"version", "rules"}):
            raise BuildsError(f"{path}: devshard_versions entry {i} has unknown key(s) {', '.join(unknown)}")
        for key in ("version", "rules"):
            if key not in entry:
                raise BuildsError(f"{path}: devshard_versions entry {i} lacks {key}")
            require_string(entry[key], BuildsError, f"{path}: devshard_versions entry {i}: {key}")
    return doc


def _version_entries(doc: dict, path: Path) -> list[dict]:
    entries = doc.get("devshard_versions", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise BuildsError(f"{path}: devshard_versions is not an array of tables ([[devshard_versions]])")
    return entries


def read_version_rules(path: Path) -> pl.DataFrame:
    """The verdict rule set each devshard version runs ([[devshard_versions]]: version, rules), as stated."""
    doc = read_builds_document(path)
    rows = [{"version": e["version"], "rule": e["rules"]} for e in _version_entries(doc, path)]
    frame = pl.DataFrame(rows, schema={"version": pl.String, "rule": pl.String})
    if (dupes := frame.filter(pl.col("version").is_duplicated())).height:
        raise BuildsError(f"{path}: devshard version {dupes['version'][0]} is given twice")
    return frame


def _host(text: str, where: str) -> str:
    try:
        return str(check_value(None, "host", text, where))
    except UnheldValue as exc:
        raise BuildsError(str(exc)) from None


def read_builds(path: Path) -> pl.DataFrame:
    rows = [
        {"valid_from": _utc(e["since"], path, i), "build": e["label"], "host": e["host"]}
        for i, e in enumerate(read_builds_document(path)["builds"], 1)
    ]
    for i, row in enumerate(rows, 1):  # after the shape: a typo must not become a host of its own
        row["host"] = _host(row["host"], f"{path}: entry {i}: host")
    frame = pl.DataFrame(rows, schema={"host": pl.String, "build": pl.String, "valid_from": pl.Datetime("us", "UTC")})
    dupes = frame.filter(pl.struct("host", "valid_from").is_duplicated())
    if dupes.height:
        raise BuildsError(f"{path}: two entries for {dupes['host'][0]} start at the same time")
    return frame.sort("host", "valid_from").with_columns(valid_to=pl.col("valid_from").shift(-1).over("host"))


def _utc(value, path: Path, i: int) -> datetime:
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if not isinstance(value, str):
        raise BuildsError(f"{path}: entry {i} has since = {value!r} ({toml_type(value)}), not an ISO-8601 time")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise BuildsError(f"{path}: entry {i} has since = {value!r}, not an ISO-8601 time") from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


@dataclass(frozen=True)
class BuildsLoaded:
    """A builds file loaded: its entries, and the warnings (hosts no escrow has as a participant)."""

    file: Path
    entries: int
    warnings: list[str] = field(default_factory=list)


def load_builds_file(con: duckdb.DuckDBPyConnection, path: Path) -> BuildsLoaded:
    """The `builds` task: `load_builds`, its warnings kept in the result instead of said."""
    warnings: list[str] = []
    with listening(Listener(warning=warnings.append)):
        n = load_builds(con, path)
    return BuildsLoaded(path, n, warnings)


def load_builds(con: duckdb.DuckDBPyConnection, path: Path) -> int:
    frame = read_builds(path)
    versions = read_version_rules(path)
    known = set(fetch_frame(con, "SELECT rule FROM verdict_rules")["rule"].to_list())
    if unknown := sorted(set(versions["rule"].to_list()) - known):
        names = ", ".join(sorted(known))
        raise BuildsError(f"{path}: devshard_versions names rule set {unknown[0]!r}, not one of {names}")
    with transaction(con):
        con.execute("DELETE FROM devshard_version_rules_t")
        if versions.height:
            con.register("new_versions", versions.to_arrow())
            con.execute("INSERT INTO devshard_version_rules_t BY NAME (SELECT * FROM new_versions)")
            con.unregister("new_versions")
        con.execute("DELETE FROM host_builds_t")
        con.register("new_builds", frame.to_arrow())
        con.execute("INSERT INTO host_builds_t BY NAME (SELECT * FROM new_builds)")
        con.unregister("new_builds")
        attribute_builds(con, "d_escrows")
    for host in unknown_hosts(con):
        warn(
            f"{path}: host {host} is not a participant of any escrow in the warehouse "
            "(a typo, or a host the copies do not have yet)"
        )
    return frame.height


def unknown_hosts(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Hosts of the build timeline that no escrow has as a participant (none while there are no escrows)."""
    return fetch_frame(con, sql_text("warehouse/builds/unknown_hosts.sql"))["host"].to_list()
