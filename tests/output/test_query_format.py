"""`query` output is exact: random DuckDB values of every type survive every format.

The property test builds a row of random values (integers up to UHUGEINT and BIGNUM,
decimals, floats with NaN/inf, text that looks like markup, blobs, enums, dates,
timestamps with and without zone, intervals, UUIDs, lists, structs, maps, NULLs),
runs it through the sandboxed query connection in each format and reads the result
back: CSV, JSON and Parquet values cast back by DuckDB equal the originals, nested
JSON equals the generated Python value, and the table/Markdown cells hold the exact text.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.output.query.execute import render_query
from pipeline.output.query.formats import QueryFormat
from pipeline.warehouse.database import open_for_write, open_sandboxed


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    path = tmp_path_factory.mktemp("query-output") / "w.duckdb"
    open_for_write(path).close()
    con = open_sandboxed(path)
    yield con
    con.close()


@pytest.fixture(scope="module")
def checker():
    """A plain in-memory DuckDB that casts text back to a type (and reads Parquet back)."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    yield con
    con.close()


@dataclass
class Column:
    type_sql: str
    values: list[Any]  # the Python value of each row (None = NULL)
    literals: list[str]  # the SQL literal of each row
    nested: bool = False
    number: bool = False  # integers and decimals: grouped digits in table/Markdown


# --- value generators ------------------------------------------------------------------------------

INT_RANGES = {
    "TINYINT": (-(2**7), 2**7 - 1),
    "SMALLINT": (-(2**15), 2**15 - 1),
    "INTEGER": (-(2**31), 2**31 - 1),
    "BIGINT": (-(2**63), 2**63 - 1),
    "HUGEINT": (-(2**127), 2**127 - 1),
    "UTINYINT": (0, 2**8 - 1),
    "UBIGINT": (0, 2**64 - 1),
    "UHUGEINT": (0, 2**128 - 1),
    "BIGNUM": (-(10**60), 10**60),
}
# Letters, digits, punctuation, symbols and spaces: "[bold]x", "|", quotes, backslashes, emoji.
TEXT = st.text(st.characters(categories=("L", "N", "P", "S", "Zs"), exclude_characters="\u2028\u2029"), max_size=12)
ENUM_LABELS = ["a", "b b", "[bold]c", "x|y", "Ünï"]
ENUM_TYPE = "ENUM(" + ", ".join(f"'{label}'" for label in ENUM_LABELS) + ")"


def quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def decimal_text(unscaled: int, scale: int) -> str:
    digits = str(abs(unscaled)).rjust(scale + 1, "0")
    body = f"{digits[:-scale]}.{digits[-scale:]}" if scale else digits
    return ("-" if unscaled < 0 else "") + body


@st.composite
def scalar(draw, nested_ok: bool = False):
    """(type, strategy of (value, literal)) for one scalar type; ``nested_ok``: only types
    whose JSON form is a plain number, string or boolean."""
    kinds = ["int", "int", "int", "decimal", "decimal", "double", "varchar", "boolean"]
    if not nested_ok:
        kinds += [
            "real",
            "blob",
            "enum",
            "date",
            "time",
            "timestamp",
            "timestamp_ns",
            "timestamptz",
            "interval",
            "uuid",
        ]
    kind = draw(st.sampled_from(kinds))
    if kind == "int":
        name = draw(st.sampled_from(sorted(INT_RANGES) if not nested_ok else ["BIGINT", "HUGEINT", "UHUGEINT"]))
        low, high = INT_RANGES[name]
        ints = st.one_of(st.sampled_from([low, high]), st.integers(low, high))  # the extremes are the hard cases
        return name, ints.map(lambda v: (v, f"{quote(str(v))}::{name}")), True
    if kind == "decimal":
        width = draw(st.integers(1, 38))
        scale = draw(st.integers(0, width))
        type_sql = f"DECIMAL({width},{scale})"
        largest = 10**width - 1
        values = st.one_of(st.sampled_from([-largest, largest]), st.integers(-largest, largest)).map(
            lambda u: decimal_text(u, scale)
        )
        return type_sql, values.map(lambda t: (Decimal(t), f"{quote(t)}::{type_sql}")), True
    if kind in ("double", "real"):
        type_sql = "DOUBLE" if kind == "double" else "REAL"
        floats = st.floats(width=64 if kind == "double" else 32, allow_nan=True, allow_infinity=True)
        return type_sql, floats.map(lambda v: (v, f"{quote(repr(v))}::{type_sql}")), False
    if kind == "varchar":
        return "VARCHAR", TEXT.map(lambda v: (v, quote(v))), False
    if kind == "boolean":
        return "BOOLEAN", st.booleans().map(lambda v: (v, "true" if v else "false")), False
    if kind == "blob":
        return "BLOB", st.binary(max_size=8).map(lambda v: (v, f"from_hex('{v.hex()}')")), False
    if kind == "enum":
        return ENUM_TYPE, st.sampled_from(ENUM_LABELS).map(lambda v: (v, f"{quote(v)}::{ENUM_TYPE}")), False
    if kind == "uuid":
        return "UUID", st.uuids().map(lambda v: (v, f"'{v}'::UUID")), False
    if kind == "date":
        dates = st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31)).map(lambda d: d.isoformat())
        return (
            "DATE",
            st.one_of(dates, st.sampled_from(["infinity", "-infinity"])).map(lambda t: (t, f"'{t}'::DATE")),
            False,
        )
    if kind == "time":
        return "TIME", st.times().map(lambda t: (t, f"'{t.isoformat()}'::TIME")), False
    if kind == "interval":
        parts = st.tuples(st.integers(-5000, 5000), st.integers(-5000, 5000), st.integers(-(10**13), 10**13))
        return (
            "INTERVAL",
            parts.map(lambda p: (p, f"(to_months({p[0]}) + to_days({p[1]}) + to_microseconds({p[2]}))")),
            False,
        )
    if kind == "timestamp_ns":
        moments = st.tuples(st.datetimes(dt.datetime(1678, 1, 1), dt.datetime(2261, 12, 31)), st.integers(0, 10**9 - 1))
        return "TIMESTAMP_NS", moments.map(lambda m: (m, f"'{m[0]:%Y-%m-%d %H:%M:%S}.{m[1]:09d}'::TIMESTAMP_NS")), False
    moments = st.datetimes(dt.datetime(1, 1, 2), dt.datetime(9999, 12, 30))
    if kind == "timestamp":
        texts = st.one_of(moments.map(lambda m: m.isoformat(sep=" ")), st.sampled_from(["infinity", "-infinity"]))
        return "TIMESTAMP", texts.map(lambda t: (t, f"'{t}'::TIMESTAMP")), False
    offsets = st.integers(-14 * 60, 14 * 60).map(
        lambda m: f"{'+' if m >= 0 else '-'}{abs(m) // 60:02d}:{abs(m) % 60:02d}"
    )
    texts = st.tuples(moments, offsets).map(lambda p: f"{p[0].isoformat(sep=' ')}{p[1]}")
    return "TIMESTAMPTZ", texts.map(lambda t: (t, f"'{t}'::TIMESTAMPTZ")), False


def nullable(values):
    return st.one_of(st.just((None, None)), values, values)


@st.composite
def column(draw, rows: int) -> Column:
    shape = draw(st.sampled_from(["scalar"] * 4 + ["list", "struct", "map"]))
    if shape == "scalar":
        type_sql, values, number = draw(scalar())
        pairs = [draw(nullable(values)) for _ in range(rows)]
        return Column(type_sql, [v for v, _ in pairs], [lit or f"NULL::{type_sql}" for _, lit in pairs], number=number)
    elem_type, elems, _ = draw(scalar(nested_ok=True))

    def literal(value_lit):
        return value_lit or f"NULL::{elem_type}"

    values, literals = [], []
    if shape == "list":
        type_sql = f"{elem_type}[]"
        for _ in range(rows):
            items = draw(st.lists(nullable(elems), max_size=3))
            values.append([v for v, _ in items])
            literals.append(f"CAST([{', '.join(literal(lit) for _, lit in items)}] AS {type_sql})")
    elif shape == "struct":
        type_sql = f'STRUCT("a" {elem_type}, "[b]" {elem_type}[])'
        for _ in range(rows):
            a = draw(nullable(elems))
            b = draw(st.lists(nullable(elems), max_size=2))
            values.append({"a": a[0], "[b]": [v for v, _ in b]})
            literals.append(
                f"CAST({{'a': {literal(a[1])}, '[b]': [{', '.join(literal(lit) for _, lit in b)}]}} AS {type_sql})"
            )
    else:
        type_sql = f"MAP(VARCHAR, {elem_type})"
        for _ in range(rows):
            keys = draw(st.lists(TEXT, max_size=3, unique=True))
            items = [draw(nullable(elems)) for _ in keys]
            values.append({k: v for k, (v, _) in zip(keys, items, strict=True)})
            entries = ", ".join(f"{quote(k)}: {literal(lit)}" for k, (_, lit) in zip(keys, items, strict=True))
            literals.append(f"CAST(MAP {{{entries}}} AS {type_sql})")
    # A whole nested value may be NULL too.
    for i in range(rows):
        if draw(st.integers(0, 5)) == 0:
            values[i], literals[i] = None, f"NULL::{type_sql}"
    return Column(type_sql, values, literals, nested=True)


@st.composite
def results(draw) -> tuple[list[str], list[Column]]:
    rows = draw(st.integers(1, 3))
    columns = draw(st.lists(column(rows), min_size=1, max_size=4))
    names = [draw(st.sampled_from(["c", "[bold]c", "a|b", 'q"t', "x y"])) + str(i) for i in range(len(columns))]
    return names, columns


def select_sql(names: list[str], columns: list[Column]) -> str:
    rows = len(columns[0].values)
    selects = []
    for r in range(rows):
        cells = ", ".join(
            f'{col.literals[r]} AS "{name.replace(chr(34), chr(34) * 2)}"'
            for name, col in zip(names, columns, strict=True)
        )
        selects.append(f"SELECT {r} AS _row, {cells}")
    return f"SELECT * EXCLUDE (_row) FROM ({' UNION ALL '.join(selects)}) ORDER BY _row"


# --- what the output must read back as --------------------------------------------------------------


def same_json(expected: Any, actual: Any) -> bool:
    """A nested value read back from JSON (numbers as Decimal) against the generated value."""
    if expected is None:
        return actual is None
    if isinstance(expected, bool):
        return actual is expected
    if isinstance(expected, float):
        if expected != expected:
            return actual == "NaN"
        if expected in (float("inf"), float("-inf")):
            return actual == ("Infinity" if expected > 0 else "-Infinity")
        return isinstance(actual, Decimal) and float(actual) == expected
    if isinstance(expected, (int, Decimal)):
        return (
            isinstance(actual, (int, Decimal)) and not isinstance(actual, bool) and Decimal(actual) == Decimal(expected)
        )
    if isinstance(expected, str):
        return actual == expected
    if isinstance(expected, list):
        return isinstance(actual, list) and len(actual) == len(expected) and all(map(same_json, expected, actual))
    if isinstance(expected, dict):
        return (
            isinstance(actual, dict)
            and list(actual) == list(expected)
            and all(same_json(expected[k], actual[k]) for k in expected)
        )
    raise AssertionError(f"unexpected generated value {expected!r}")


def casts_back(checker, text: str, col: Column, row: int) -> bool:
    """DuckDB reads ``text`` back as the very value of the literal."""
    return checker.execute(
        f"SELECT CAST($t AS {col.type_sql}) IS NOT DISTINCT FROM {col.literals[row]}", {"t": text}
    ).fetchone()[0]


def grouped(text: str) -> str:
    sign, digits, fraction = re.fullmatch(r"(-?)(\d+)(\.\d+)?", text).groups()
    return f"{sign}{int(digits):,}{fraction or ''}"


def parse_json(text: str):
    number = lambda raw: ("number", raw)  # noqa: E731  (keeps the exact digits and that it was a number)
    return json.loads(text, parse_int=number, parse_float=number)


def plain_json(value: Any) -> Any:
    """parse_json's ("number", raw) markers as Decimals, for nested values."""
    if isinstance(value, tuple):
        return Decimal(value[1])
    if isinstance(value, list):
        return [plain_json(v) for v in value]
    if isinstance(value, dict):
        return {k: plain_json(v) for k, v in value.items()}
    return value


def read_csv(checker, text: str, tmp_path) -> list[tuple]:
    path = tmp_path / "out.csv"
    path.write_text(text + "\n")
    return checker.execute(
        "SELECT * FROM read_csv($p, header = true, all_varchar = true, allow_quoted_nulls = false, "
        "quote = '\"', escape = '\"', delim = ',')",
        {"p": str(path)},
    ).fetchall()


# --- the property ----------------------------------------------------------------------------------


ROUND_TRIP = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@settings(ROUND_TRIP, max_examples=40)  # the heavy tier runs 120 (below)
@given(results())
def test_every_value_round_trips_through_every_format(sandbox, checker, tmp_path, result):
    names, columns = result
    sql = select_sql(names, columns)
    rows = len(columns[0].values)

    def render(fmt: QueryFormat, **options):
        return render_query(sandbox, sql, {}, fmt, **options).data

    # JSON: an array of objects with the exact keys; numbers stay numbers with every digit.
    records = parse_json(render(QueryFormat.json))
    assert [list(r) for r in records] == [names] * rows
    csv_rows = read_csv(checker, render(QueryFormat.csv), tmp_path)
    assert len(csv_rows) == rows
    table = render(QueryFormat.table, width=None).splitlines()
    markdown = render(QueryFormat.markdown).splitlines()
    vertical = render(QueryFormat.table, vertical=True).split("\n")
    assert markdown[0] == "| " + " | ".join(n.replace("|", "\\|") for n in names) + " |"
    parquet_path = tmp_path / "out.parquet"
    parquet_path.write_bytes(render(QueryFormat.parquet))
    parquet_types = [
        t
        for (t,) in checker.execute(
            "SELECT column_type FROM (DESCRIBE SELECT * FROM read_parquet($p))", {"p": str(parquet_path)}
        ).fetchall()
    ]

    for r in range(rows):
        table_line = table[3 + r]  # after the top border, the header and its rule
        markdown_line = markdown[2 + r]
        for c, (name, col) in enumerate(zip(names, columns, strict=True)):
            value, json_value, csv_value = col.values[r], records[r][name], csv_rows[r][c]
            where = f"row {r} column {name} {col.type_sql} = {col.literals[r]}"
            if value is None:
                assert json_value is None and csv_value is None, where
                shown = "NULL"
            elif col.nested:
                assert same_json(value, plain_json(json_value)), where
                assert same_json(value, plain_json(parse_json(csv_value))), where
                shown = csv_value
            else:
                if isinstance(json_value, tuple):
                    assert col.number or col.type_sql in ("DOUBLE", "REAL"), where
                    json_text = json_value[1]
                elif col.type_sql in ("DOUBLE", "REAL") and json_value in ("NaN", "Infinity", "-Infinity"):
                    json_text = json_value
                else:
                    assert isinstance(json_value, (str, bool)) and not col.number, where
                    json_text = json.dumps(json_value) if isinstance(json_value, bool) else json_value
                assert casts_back(checker, json_text, col, r), where
                assert casts_back(checker, csv_value, col, r), where
                shown = grouped(csv_value) if col.number else csv_value
            assert shown in table_line, (where, table_line)
            assert shown.replace("|", "\\|") in markdown_line, (where, markdown_line)
            assert f"{name.ljust(max(len(n) for n in names))} | {shown}" in vertical, where
            # Parquet: the column read back (typed, or exact text for the types Arrow would bend) is the value.
            if col.nested and parquet_types[c] == "VARCHAR":
                text = checker.execute(
                    f"SELECT #{c + 1} FROM read_parquet($p) LIMIT 1 OFFSET {r}", {"p": str(parquet_path)}
                ).fetchone()[0]
                assert value is None and text is None or same_json(value, plain_json(parse_json(text))), where
            else:
                assert checker.execute(
                    f"SELECT CAST(#{c + 1} AS {col.type_sql}) IS NOT DISTINCT FROM {col.literals[r]} "
                    f"FROM read_parquet($p) LIMIT 1 OFFSET {r}",
                    {"p": str(parquet_path)},
                ).fetchone()[0], (where, parquet_types[c])


# 120 examples; stands in the default tier: the same on 40 examples,
# tests/output/test_query_format.py::test_every_value_round_trips_through_every_format
@pytest.mark.heavy
@settings(ROUND_TRIP, max_examples=120)
@given(results())
def test_every_value_round_trips_through_every_format_heavy(sandbox, checker, tmp_path, result):
    test_every_value_round_trips_through_every_format.hypothesis.inner_test(sandbox, checker, tmp_path, result)


# --- specific cases --------------------------------------------------------------------------------


def test_sum_of_integers_is_a_json_number(sandbox):
    # DuckDB sums INTEGERs into a HUGEINT: once a TypeError traceback.
    assert json.loads(render_query(sandbox, "SELECT sum(1::INT) AS n", {}, QueryFormat.json).data) == [{"n": 1}]


def test_values_are_never_rich_markup(sandbox):
    sql = "SELECT '[bold]x' AS \"[red]v\", ':smile:' AS e, '[link=http://a]y[/link]' AS l"
    for fmt in (QueryFormat.table, QueryFormat.markdown, QueryFormat.csv, QueryFormat.json):
        text = render_query(sandbox, sql, {}, fmt).data
        for literal in ("[bold]x", "[red]v", ":smile:", "[link=http://a]y[/link]"):
            assert literal in text, (fmt, text)
    assert "[bold]x" in render_query(sandbox, sql, {}, QueryFormat.table, vertical=True).data


def test_nan_and_infinity_are_json_strings_and_text_elsewhere(sandbox):
    sql = "SELECT 'nan'::DOUBLE AS a, 'inf'::DOUBLE AS b, '-inf'::REAL AS c, ['nan'::DOUBLE, 1.5] AS d"
    assert json.loads(render_query(sandbox, sql, {}, QueryFormat.json).data) == [
        {"a": "NaN", "b": "Infinity", "c": "-Infinity", "d": ["NaN", 1.5]}
    ]
    assert render_query(sandbox, sql, {}, QueryFormat.csv).data.splitlines()[1] == 'nan,inf,-inf,"[""NaN"",1.5]"'


def test_timestamps_are_iso_8601_with_z_only_when_zoned(sandbox):
    sql = (
        "SELECT TIMESTAMPTZ '2026-10-23 10:00:00.25+02' AS zoned, TIMESTAMP '2026-10-23 08:00:00' AS naive, "
        "TIMESTAMP_NS '2026-10-23 08:00:00.123456789' AS ns"
    )
    assert json.loads(render_query(sandbox, sql, {}, QueryFormat.json).data) == [
        {"zoned": "2026-10-23T08:00:00.25Z", "naive": "2026-10-23T08:00:00", "ns": "2026-10-23T08:00:00.123456789"}
    ]


def test_nested_timestamps_and_reals_read_as_they_do_at_the_top(sandbox):
    # to_json writes a nested timestamp as DuckDB's text ("2026-10-23 08:00:00+00") and widens a nested
    # REAL to DOUBLE (0.10000000149011612): inside a list, struct or map they read as they do alone.
    sql = (
        "SELECT [TIMESTAMPTZ '2026-10-23 10:00:00.25+02', NULL] AS l, "
        "{'at': TIMESTAMP '2026-10-23 08:00:00', 'ns': [TIMESTAMP_NS '2026-10-23 08:00:00.123456789'], 'r': 0.1::REAL, "
        "'\"q\" x': ['nan'::REAL]} AS s, "
        "MAP {TIMESTAMPTZ '2026-10-23 08:00:00+00': [0.1::REAL]} AS m, "
        "[[TIMESTAMP '2026-10-23 08:00:00.5']]::TIMESTAMP[][1] AS a, "
        "CAST(NULL AS STRUCT(t TIMESTAMP)) AS n"
    )
    top = json.loads(
        render_query(
            sandbox, "SELECT TIMESTAMPTZ '2026-10-23 10:00:00.25+02' AS z, 0.1::REAL AS r", {}, QueryFormat.json
        ).data
    )[0]
    assert (top["z"], top["r"]) == ("2026-10-23T08:00:00.25Z", 0.1)
    assert json.loads(render_query(sandbox, sql, {}, QueryFormat.json).data) == [
        {
            "l": ["2026-10-23T08:00:00.25Z", None],
            "s": {"at": "2026-10-23T08:00:00", "ns": ["2026-10-23T08:00:00.123456789"], "r": 0.1, '"q" x': ["NaN"]},
            "m": {"2026-10-23T08:00:00Z": [0.1]},
            "a": [["2026-10-23T08:00:00.5"]],
            "n": None,
        }
    ]
    csv = render_query(sandbox, sql, {}, QueryFormat.csv).data.splitlines()[1]
    assert '""2026-10-23T08:00:00.25Z""' in csv and '""r"":0.1,' in csv
    assert '"2026-10-23T08:00:00Z"' in render_query(sandbox, sql, {}, QueryFormat.table, vertical=True).data


def test_csv_tells_null_from_the_empty_string_and_nests_as_json(sandbox):
    sql = "SELECT NULL::VARCHAR AS a, '' AS b, {'k': [1, 2]} AS c, MAP {'x': 'y'} AS d, 'a,\"b\"' AS e"
    assert (
        render_query(sandbox, sql, {}, QueryFormat.csv).data
        == 'a,b,c,d,e\n,"","{""k"":[1,2]}","{""x"":""y""}","a,""b"""'
    )


def test_vertical_prints_one_block_per_record_with_multi_line_values(sandbox):
    text = render_query(
        sandbox,
        "SELECT * FROM (VALUES (1, 'one'), (2, E'two\\nlines')) t(n, word)",
        {},
        QueryFormat.table,
        vertical=True,
    ).data
    assert text.splitlines() == [
        "-[ RECORD 1 ]---",
        "n    | 1",
        "word | one",
        "-[ RECORD 2 ]---",
        "n    | 2",
        "word | two",
        "     | lines",
    ]


def test_table_leaves_out_columns_that_do_not_fit_and_names_them(sandbox):
    sql = "SELECT 1 AS first_column, repeat('x', 30) AS wide_text, 3 AS third, 4 AS fourth"
    rendered = render_query(sandbox, sql, {}, QueryFormat.table, width=40)
    lines = rendered.data.splitlines()
    assert max(len(line) for line in lines) <= 40
    assert "first_column" in lines[1] and "wide_text" in lines[1]
    assert rendered.hidden == ["third", "fourth"]
    # Folded, not cut: every x of the long value is still there.
    assert "".join(re.findall(r"x+", "\n".join(lines[3:]))) == "x" * 30
    full = render_query(sandbox, sql, {}, QueryFormat.table, width=None)
    assert full.hidden == [] and "fourth" in full.data and "x" * 30 in full.data


def test_parquet_keeps_hugeints_intervals_and_zones(sandbox, checker, tmp_path):
    sql = (
        "SELECT 12345678901234567890123456789012345678::HUGEINT AS h, "
        "340282366920938463463374607431768211455::UHUGEINT AS u, "
        "INTERVAL '1 month 2 days 00:00:00.000003' AS i, TIMETZ '12:00:00+05:30' AS t, 1.50::DECIMAL(4,2) AS d"
    )
    path = tmp_path / "x.parquet"
    path.write_bytes(render_query(sandbox, sql, {}, QueryFormat.parquet).data)
    row = checker.execute(
        "SELECT h::VARCHAR, u::VARCHAR, i::VARCHAR, t::VARCHAR, d::VARCHAR FROM read_parquet($p)", {"p": str(path)}
    ).fetchone()
    assert row == (
        "12345678901234567890123456789012345678",
        "340282366920938463463374607431768211455",
        "1 month 2 days 00:00:00.000003",
        "12:00:00+05:30",
        "1.50",
    )
