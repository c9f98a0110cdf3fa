"""Redaction by libpq's own reading: for generated URLs and keyword strings, no value that libpq
(psycopg's `conninfo_to_dict`, which calls PQconninfoParse) treats as a credential survives
`redact_url`, `scrub`, a failed connection's message or anything `ingest` and `doctor` print."""

from __future__ import annotations

from urllib.parse import quote

import psycopg.pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from psycopg.conninfo import conninfo_to_dict
from typer.testing import CliRunner

from pipeline.cli.app import app
from pipeline.core.secrets import CREDENTIAL_KEYS, libpq_url, redact_url, scrub

runner = CliRunner()


def test_every_parameter_libpq_hides_is_a_credential_here():
    hidden = {o.keyword.decode() for o in psycopg.pq.Conninfo.get_defaults() if o.dispchar == b"*"}
    assert hidden and hidden <= CREDENTIAL_KEYS


def _credentials(conninfo: str) -> set[str]:
    """What libpq reads as a credential in `conninfo` (nothing when it cannot parse it)."""
    try:
        parsed = conninfo_to_dict(conninfo)
    except (psycopg.ProgrammingError, UnicodeDecodeError):  # %a7: no UTF-8 behind the escape
        return set()
    return {str(v) for k, v in parsed.items() if k in CREDENTIAL_KEYS and v}


# Secrets long and distinctive enough that finding one in an output is a leak, not a coincidence;
# they hold every character that ends a part of a URL or a keyword value.
secrets = st.builds(
    lambda core, tail: f"Zq{core}{tail}",
    st.text(alphabet="abcXYZ019@/:?&=#%' \\-_.", min_size=3, max_size=12),
    st.text(alphabet="kw7", min_size=1, max_size=3),
)
keys = st.sampled_from(sorted(CREDENTIAL_KEYS))


def _encode_some(key: str, mask: list[bool]) -> str:
    """`key` with the letters `mask` picks written as %XX (libpq decodes parameter names)."""
    return "".join(f"%{ord(c):02x}" if m else c for c, m in zip(key, mask * len(key), strict=False))


@st.composite
def urls(draw) -> tuple[str, set[str]]:
    """A postgresql:// URL to a closed port with a user-part password and credential parameters,
    and the secrets as the user meant them."""
    meant = set()
    user = "reader"
    password = draw(st.one_of(st.none(), secrets))
    authority = f"{user}:{password}@127.0.0.1:1" if password else f"{user}@127.0.0.1:1"
    if password:
        meant.add(password)
    params = ["sslmode=disable"]
    for key, value, mask in draw(st.lists(st.tuples(keys, secrets, st.lists(st.booleans(), min_size=1)), max_size=3)):
        params.append(f"{_encode_some(key, mask)}={quote(value, safe='')}")
        meant.add(value)
    return f"postgresql://{authority}/db?{'&'.join(params)}", meant


@st.composite
def keyword_dsns(draw) -> tuple[str, set[str]]:
    meant = set()
    parts = ["host=127.0.0.1", "port=1"]
    for key, value in draw(st.lists(st.tuples(keys, secrets), min_size=1, max_size=3)):
        quoted = "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
        parts.insert(draw(st.integers(0, len(parts))), f"{key} = {quoted}")
        meant.add(value)
    return " ".join(parts), meant


def _leaks(text: str, conninfo: str, meant: set[str]) -> list[str]:
    found = _credentials(libpq_url(conninfo)) | _credentials(conninfo) | meant
    return [s for s in found if len(s) >= 4 and s in text]


@settings(max_examples=150, deadline=None)
@given(st.one_of(urls(), keyword_dsns()))
@example(("postgresql://reader@127.0.0.1:1/db?pass%77ord=Zqsecret1&ssl%70assword=Zqsecret2", {"Zqsecret1"}))
@example(("postgresql://reader@127.0.0.1:1/db?%70assword=Zqsecret3", {"Zqsecret3"}))
@example(("postgresql://reader:Zq/se@cr:et@127.0.0.1:1/db", {"Zq/se@cr:et"}))
@example(("postgresql://reader:Zq0%a7@127.0.0.1:1/db?sslmode=disable", {"Zq0%a7"}))  # hypothesis found it
def test_no_credential_libpq_reads_survives_redaction(case):
    conninfo, meant = case
    for shown in (redact_url(conninfo), scrub(f"error: cannot use {conninfo} today")):
        assert not _leaks(shown, conninfo, meant), shown


@pytest.mark.parametrize("password", ["p@ss", "a/b@c", "x:y?z", "50%off", "pw%40x"])
def test_libpq_reads_a_user_part_password_whole(password):
    from urllib.parse import unquote

    parsed = conninfo_to_dict(libpq_url(f"postgresql://reader:{password}@db.example:5433/copy"))
    assert parsed["password"] == unquote(password) and parsed["host"] == "db.example" and parsed["dbname"] == "copy"


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(urls())
@example(("postgresql://reader:Zqp@ss/w0rd@127.0.0.1:1/db?sslmode=disable", {"Zqp@ss/w0rd"}))
@example(("postgresql://reader@127.0.0.1:1/db?sslmode=disable&pass%77ord=Zqleaked9", {"Zqleaked9"}))
def test_a_failed_connection_prints_no_credential(tmp_path_factory, case):
    url, meant = case
    warehouse = tmp_path_factory.mktemp("w") / "w.duckdb"
    for args in (["ingest", url, "-w", str(warehouse)], ["doctor", url]):
        result = runner.invoke(app, args)
        assert result.exit_code == 1, result.output
        assert result.output.startswith("error: ") and "Traceback" not in result.output
        assert not _leaks(result.output, url, meant), result.output
    assert not warehouse.exists()  # a source that cannot be read leaves no warehouse behind


ENCODED_NAMES = ["pass%77ord={pw}", "%70assword={pw}", "ssl%70assword={pw}&sslmode=disable"]


@pytest.mark.parametrize("query", ENCODED_NAMES)
def test_a_percent_encoded_password_name_is_shown_and_identified_without_its_value(query):
    """What an ingest stores and doctor prints of a copy's URL (its display and its source id), for each
    spelling of the test below, without a server."""
    from pipeline.sources.store.postgres_address import PostgresAddress

    secret = "Pl4ntedEncoded9"
    address = PostgresAddress("postgresql://postgres@127.0.0.1:5432/copy?" + query.format(pw=secret))
    assert secret not in address.display and "=***" in address.display, address.display
    assert secret not in address.source_id(None) and secret not in address.source_id("lineage")


# An ingest of a PostgreSQL copy per spelling; the first in the default tier, and each spelling's display and
# source id there too. stands in the default tier:
# tests/core/test_secrets_libpq.py::test_a_percent_encoded_password_name_is_never_stored,
# tests/core/test_secrets_libpq.py::test_a_percent_encoded_password_name_is_shown_and_identified_without_its_value
ANOTHER_SPELLING = pytest.mark.heavy


@pytest.mark.parametrize(
    "query", [ENCODED_NAMES[0], *(pytest.param(q, marks=ANOTHER_SPELLING) for q in ENCODED_NAMES[1:])]
)
def test_a_percent_encoded_password_name_is_never_stored(pg_copy, tmp_path, query):
    import duckdb

    secret = "Pl4ntedEncoded9"
    url = pg_copy(3) + "?" + query.format(pw=secret)
    warehouse = tmp_path / "w.duckdb"
    result = runner.invoke(app, ["ingest", url, "-w", str(warehouse)])
    assert result.exit_code == 0, result.output
    assert secret not in result.output
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        displays = [d for (d,) in con.execute("SELECT DISTINCT source_display FROM ingest_runs").fetchall()]
        ids = [i for (i,) in con.execute("SELECT DISTINCT source_id FROM ingest_runs").fetchall()]
    finally:
        con.close()
    assert displays and all(secret not in d and "=***" in d for d in displays), displays
    assert all(secret not in i for i in ids)
    doctor = runner.invoke(app, ["doctor", url])
    assert doctor.exit_code == 0 and secret not in doctor.output
