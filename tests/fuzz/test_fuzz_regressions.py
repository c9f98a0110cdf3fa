"""Cases the fuzzer found, kept as explicit tests. The three fixed by typed reading of untyped stores
run in the default tier; the others take seconds each and run in the heavy tier."""

from __future__ import annotations

import pytest

from tests.factories import data_samples_warehouse
from tests.fuzz.test_fuzz import (
    RECORD,
    DuplicateRows,
    FileKind,
    PayloadFile,
    SetValue,
    _fuzz_arguments,
    _fuzz_json,
    _fuzz_store,
)


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param(
            [SetValue(0, 0, 0, 0, "NULL")],
            id="null-escrow-cache-key",
        ),
        pytest.param(
            [SetValue(4, 1, 1, 3, "'text in a number column'")],
            id="text-in-a-diffs-integer",
        ),
        pytest.param(
            [SetValue(4, 5, 0, 0, "X'FF00FE'")],
            id="blob-escrow-id",
        ),
        # stands in the default tier: tests/fuzz/test_fuzz.py::test_fuzz_sqlite_store
        pytest.param([FileKind(2, "padded-duplicate")], id="two-files-claim-one-epoch", marks=pytest.mark.heavy),
        # stands in the default tier: tests/fuzz/test_fuzz.py::test_fuzz_sqlite_store
        pytest.param([DuplicateRows(4, 5)], id="duplicated-session-rows", marks=pytest.mark.heavy),
        pytest.param(
            [SetValue(4, 5, 2, 0, "1180591620717411303424")],
            id="2-to-the-70-in-sessions",
            # stands in the default tier: tests/fuzz/test_fuzz.py::test_fuzz_sqlite_store
            marks=pytest.mark.heavy,
        ),
        # stands in the default tier: tests/fuzz/test_fuzz.py::test_fuzz_sqlite_store
        pytest.param([PayloadFile(3, b"\xff\xfe")], id="payload-not-utf8", marks=pytest.mark.heavy),
        # stands in the default tier: tests/fuzz/test_fuzz.py::test_fuzz_sqlite_store
        pytest.param([FileKind(3, "garbage")], id="epoch-file-of-random-bytes", marks=pytest.mark.heavy),
    ],
)
def test_a_case_the_fuzzer_found(tmp_path, changes):
    _fuzz_store(tmp_path / "case", changes)


def test_a_json_case_the_fuzzer_found(tmp_path):
    """A participant record whose `counters` is a number, not a list: one problem row, no traceback."""
    _fuzz_json(tmp_path / "json", [[RECORD | {"counters": 1}]], None)
    _fuzz_json(tmp_path / "json2", [[RECORD | {"model": [None]}]], None)  # a model that is no string


# a whole report per case; stands in the default tier:
# tests/output/test_output_safety.py::test_an_unwritable_output_is_one_line,
# tests/fuzz/test_fuzz.py::test_fuzz_arguments
@pytest.mark.heavy
@pytest.mark.parametrize("out", ["/dev/null", "\n"], ids=["a-device", "a-newline"])
def test_an_argument_case_the_fuzzer_found(tmp_path, out):
    """`report --out` naming a device (one line, exit 1) or a directory named by a newline (its line says so
    in one line)."""
    warehouse = data_samples_warehouse(tmp_path / "w.duckdb")
    _fuzz_arguments(warehouse, tmp_path / "args", ("report", "epoch", "--out", out), {})
