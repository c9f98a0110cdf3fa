"""Event time (created_at in seconds or milliseconds, or the nonce clock) and build attribution."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from pipeline.core.address import sample_address
from pipeline.ingest.builds import BuildsError, load_builds, read_builds
from pipeline.jobs.config import ConfigError, load_config
from pipeline.warehouse.database import open_for_write
from tests.helpers import frame, ingest

H1 = sample_address("h7")  # a well-formed address: a builds.toml host must be one
UNHELD = sample_address("7yp0")  # well-formed, in no escrow


@pytest.fixture(scope="module")
def old_epochs_ingested(tmp_path_factory, timeline) -> Path:
    """A warehouse of copy(3) in SQLite (named as `sqlite_copy(3)` names it), ingested once per module."""
    root = tmp_path_factory.mktemp("old-epochs")
    wh = root / "w.duckdb"
    ingest(wh, timeline.copy(last_epoch=3).write_sqlite(root / "store-3"))
    assert not wh.with_name(wh.name + ".wal").exists()  # closed, so checkpointed: the file alone is the warehouse
    return wh


@pytest.fixture
def warehouse_with_old_epochs(tmp_path, old_epochs_ingested):
    """copy(3) holds the oldest epoch (created_at = 0) and the epoch stored in milliseconds: the test's own copy
    of the warehouse that ingested it (built once per module)."""
    return Path(shutil.copyfile(old_epochs_ingested, tmp_path / "w.duckdb"))


def test_event_times_follow_created_at_or_the_nonce_clock(warehouse_with_old_epochs, timeline):
    truth = timeline.copy(last_epoch=3).truth
    units = truth.planted["created_at_unit"]
    assert units == {1: "zero", 2: "s", 3: "ms"}
    got = frame(
        warehouse_with_old_epochs,
        "SELECT escrow_id, nonce, tx_index, epoch(event_at)::BIGINT AS event_at FROM txs "
        "ORDER BY escrow_id, nonce, tx_index",
    )
    want = truth.txs.select("escrow_id", "nonce", "tx_index", "event_at").sort("escrow_id", "nonce", "tx_index")
    assert_frame_equal(got, want, check_dtypes=False)
    sources = frame(warehouse_with_old_epochs, "SELECT epoch_id, any_value(time_source) AS s FROM escrows GROUP BY ALL")
    assert dict(sources.iter_rows()) == {1: "nonce_clock", 2: "created_at", 3: "created_at"}


def _build_at(windows, host: str, ts: datetime) -> str | None:
    own = sorted((w for w in windows if w.host == host), key=lambda w: w.since)
    label = None
    for w in own:
        if ts.timestamp() >= w.since:
            label = w.label
    return label


def test_builds_come_from_an_as_of_join_on_event_time(tmp_path, sqlite_copy, timeline):
    wh = tmp_path / "w.duckdb"
    ingest(wh, sqlite_copy(4))
    builds = tmp_path / "builds.toml"
    timeline.write_builds_toml(builds)
    con = open_for_write(wh)
    assert load_builds(con, builds) == len(timeline.builds)
    con.close()
    v = frame(wh, "SELECT validator, executor, event_at, validator_build, executor_build FROM validations")
    assert v.height > 0
    for row in v.iter_rows(named=True):
        assert row["validator_build"] == _build_at(timeline.builds, row["validator"], row["event_at"])
        assert row["executor_build"] == _build_at(timeline.builds, row["executor"], row["event_at"])
    i = frame(wh, "SELECT executor, event_at, executor_build FROM inferences WHERE event_at IS NOT NULL")
    for row in i.iter_rows(named=True):
        assert row["executor_build"] == _build_at(timeline.builds, row["executor"], row["event_at"])
    labels = set(
        frame(wh, "SELECT DISTINCT validator_build FROM validations WHERE validator_build IS NOT NULL")[
            "validator_build"
        ]
    )
    assert len(labels) >= 2  # the window boundaries fall inside the copy


def test_builds_file_replaces_the_timeline_and_rejects_bad_files(tmp_path):
    good = tmp_path / "b.toml"
    good.write_text(
        f'[[builds]]\nhost = "{H1}"\nlabel = "a"\nsince = "2026-10-01T00:00:00Z"\n'
        f'[[builds]]\nhost = "{H1}"\nlabel = "b"\nsince = 2026-10-05T12:00:00Z\n'
    )
    frame_ = read_builds(good)
    assert frame_.to_dicts() == [
        {
            "host": H1,
            "build": "a",
            "valid_from": datetime(2026, 10, 1, tzinfo=UTC),
            "valid_to": datetime(2026, 10, 5, 12, tzinfo=UTC),
        },
        {"host": H1, "build": "b", "valid_from": datetime(2026, 10, 5, 12, tzinfo=UTC), "valid_to": None},
    ]
    bad = tmp_path / "bad.toml"
    bad.write_text(f'[[builds]]\nhost = "{H1}"\nsince = "2026-10-01"\n')
    with pytest.raises(BuildsError, match="lacks label"):
        read_builds(bad)
    bad.write_text(f'[[builds]]\nhost = "{H1}"\nlabel = "x"\nsince = "yesterday"\n')
    with pytest.raises(BuildsError, match="not an ISO-8601 time"):
        read_builds(bad)
    bad.write_text('[[builds]]\nhost = "h1"\nlabel = "x"\nsince = "2026-10-01"\n')  # a host that is no address
    with pytest.raises(
        BuildsError, match=r"entry 1: host 'h1' is not a gonka1… address: it does not start with gonka1"
    ):
        read_builds(bad)
    bad.write_text(f'[[builds]]\nhost = "{H1.upper()}"\nlabel = "x"\nsince = "2026-10-01"\n')
    assert read_builds(bad)["host"].to_list() == [H1]  # all upper case: the same address, in lower case


@pytest.mark.parametrize(
    "text, message",
    [
        (
            b'[[builds]]\nhost = ["h1", "h2"]\nlabel = "a"\nsince = "2026-10-01"\n',
            "entry 1: host must be a string, not an array",
        ),
        (
            b'[[builds]]\nhost = "h1"\nlabel = {name = "a"}\nsince = "2026-10-01"\n',
            "entry 1: label must be a string, not a table",
        ),
        (
            b'[[builds]]\nhost = "h1"\nlabel = "a"\nsince = 20261001\n',
            "since = 20261001 (an integer), not an ISO-8601 time",
        ),
        (
            b'focal_host = 3\n[[builds]]\nhost = "h1"\nlabel = "a"\nsince = "2026-10-01"\n',
            "focal_host must be a string, not an integer",
        ),
        (b"builds = [1, 2]\n", "no [[builds]] entries"),
        (b'[[builds]]\nhost = "h\xe9"\n', "not UTF-8 text (byte 0xe9 at offset 20)"),
        (b"[[builds]\n", "not valid TOML"),
    ],
)
def test_a_builds_file_of_the_wrong_shape_is_rejected_never_stringified(tmp_path, text, message):
    path = tmp_path / "builds.toml"
    path.write_bytes(text)
    with pytest.raises(BuildsError) as caught:
        read_builds(path)
    assert str(caught.value).startswith(f"{path}: ") and message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_host_that_no_escrow_has_is_loaded_with_a_warning(warehouse_with_old_epochs, tmp_path, timeline, capsys):
    builds = tmp_path / "builds.toml"
    timeline.write_builds_toml(builds)
    from pipeline.cli.console import warning as print_warning
    from pipeline.core.events import Listener, listening

    con = open_for_write(warehouse_with_old_epochs)
    try:
        with listening(Listener(warning=print_warning)):  # the library's warnings, printed as the CLI does
            load_builds(con, builds)
            assert capsys.readouterr().err == ""  # every host of the generated timeline takes part in its escrows
            builds.write_text(
                builds.read_text() + f'\n[[builds]]\nhost = "{UNHELD}"\nlabel = "x"\nsince = "2026-10-01T00:00:00Z"\n'
            )
            assert load_builds(con, builds) == len(timeline.builds) + 1
    finally:
        con.close()
    warning = capsys.readouterr().err
    assert (
        warning.startswith(f"warning: {builds}: host {UNHELD} is not a participant of any escrow")
        and warning.count("\n") == 1
    )


# TOML values of every type, a few that are not TOML, and (through latin-1) bytes that are not UTF-8.
TOML_VALUES = st.sampled_from(
    [
        '"h1"',
        '"2026-10-01T00:00:00Z"',
        '"yesterday"',
        '""',
        "7",
        "-1",
        "3.5",
        "true",
        "2026-10-01T00:00:00Z",
        "2026-10-01",
        "12:00:00",
        "[1, 2]",
        '["a", "b"]',
        "[]",
        "{}",
        "{x = 1}",
        "nan",
        "inf",
        r'"\u0000"',
        "99999999999999999999",
        '"é"',
        "[[",
        '"x" "y"',
        '"../../etc"',
    ]
)
KEYS = st.sampled_from(
    [
        "host",
        "label",
        "since",
        "focal_host",
        "builds",
        "warehouse",
        "output",
        "finality_lag",
        "path",
        "url",
        "kind",
        "sources",
        "year",
        "timezone",
    ]
)
LINES = st.one_of(
    st.builds("{} = {}".format, KEYS, TOML_VALUES),
    st.sampled_from(["[[builds]]", "[[sources]]", "[builds]", "[sources]", "", "# comment", "[x"]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(LINES, max_size=12), latin1=st.booleans())
def test_any_builds_or_config_file_loads_or_fails_with_one_line(tmp_path, lines, latin1):
    path = tmp_path / "fuzz.toml"
    path.write_bytes(("\n".join(lines) + "\n").encode("latin-1" if latin1 else "utf-8"))
    for load, errors in ((read_builds, (BuildsError,)), (load_config, (ConfigError, BuildsError))):
        try:
            load(path)
        except errors as exc:  # anything else (a TypeError, a traceback) fails the test
            assert str(exc).startswith(str(tmp_path)) and "\n" not in str(exc), str(exc)
