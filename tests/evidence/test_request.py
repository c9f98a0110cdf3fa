"""A host or window the warehouse does not hold is a one-line error naming what it holds, never an empty
table with a provenance footer; a malformed address is refused as such; a held host with no rows in a
held window still gets its table."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.core.address import CHARSET, address_problem, encode, sample_address
from pipeline.evidence import EvidenceError, compute
from pipeline.evidence.request import held_description
from pipeline.warehouse.database import fetch_frame, open_read_only
from tests.factories import data_samples_warehouse
from tests.helpers import Done, cli_in

FOCAL = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"  # data-samples/builds.toml focal_host
HELD = "epochs 2–4 (2026-10-19T07:13:23Z to 2026-10-30T06:16:21Z)"  # what data-samples/ holds


def _neighbour(address: str) -> str:
    """A well-formed address one data character away from ``address`` (its checksum recomputed)."""
    data = [CHARSET.index(c) for c in address[6:-6]]
    data[-1] = (data[-1] + 1) % 32
    return encode(data)


# -- addresses ----------------------------------------------------------------------------------------


def test_bech32_addresses_are_checked_by_their_checksum():
    assert address_problem(FOCAL) is None
    assert address_problem(FOCAL.upper()) is None  # bech32 allows one case throughout
    # BIP-173's own valid vector, under its prefix.
    assert address_problem("abcdef1qpzry9x8gf2tvdw0s3jn54khce6mua7lmqqqxw", hrp="abcdef") is None
    typo = FOCAL[:20] + ("q" if FOCAL[20] != "q" else "p") + FOCAL[21:]
    assert address_problem(typo) == "fails its bech32 checksum (a typo?)"
    assert address_problem(FOCAL[:-1]) == "fails its bech32 checksum (a typo?)"
    assert address_problem("gonka1wrongaddr") == "has characters outside the bech32 alphabet (o)"
    assert address_problem("cosmos1qypqxpq9qcrsszg2pvxq6rs0zqg3yyc5lzv7xu") == "does not start with gonka1"
    assert address_problem("Gonka1" + FOCAL[6:]) == "mixes upper and lower case"
    assert address_problem(_neighbour(FOCAL)) is None
    assert address_problem(sample_address("l0gh0st")) is None


def test_the_samples_addresses_are_well_formed(timeline):
    from pipeline.samples.logs import EXECUTOR, HOST

    for address in [*timeline.cast.hosts, *timeline.cast.gateways, HOST, EXECUTOR]:
        assert address_problem(address) is None, address
    assert timeline.focal_host != _neighbour(timeline.focal_host)


def test_held_description_names_epoch_ranges_and_the_span():
    import datetime as dt

    first, last = dt.datetime(2026, 1, 1, tzinfo=dt.UTC), dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
    assert held_description([2, 3, 4, 7, 9, 10], first, last) == (
        "epochs 2–4, 7, 9–10 (2026-01-01T00:00:00Z to 2026-01-02T00:00:00Z)"
    )
    assert held_description([5], None, None) == "epoch 5"
    assert held_description([], None, None) == "no data yet (ingest a copy first)"


# -- on the samples' warehouse --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Path:
    return data_samples_warehouse(tmp_path_factory.mktemp("request") / "w.duckdb", vllm_log_host=FOCAL)


@pytest.fixture(scope="module")
def con(warehouse):
    con = open_read_only(warehouse)
    yield con
    con.close()


def test_a_malformed_address_is_refused_as_such(con):
    with pytest.raises(EvidenceError) as err:
        compute("votes-by-build", con, host="gonka1wrongaddr", epoch=3)
    assert str(err.value).startswith("--host 'gonka1wrongaddr' is not a gonka1… address: it has characters outside")
    typo = FOCAL[:-1] + ("q" if FOCAL[-1] != "q" else "p")
    with pytest.raises(EvidenceError) as err:
        compute("votes-by-build", con, host=typo, epoch=3)
    assert str(err.value) == (
        f"--host '{typo}' is not a gonka1… address: it fails its bech32 checksum (a typo?); "
        f"closest in the warehouse: {FOCAL}"
    )


def test_a_host_not_in_the_warehouse_names_the_closest_held_hosts(con):
    absent = _neighbour(FOCAL)
    held = fetch_frame(con, "SELECT DISTINCT address FROM escrow_slots")["address"].to_list()
    assert absent not in held and FOCAL in held
    for name in ("votes-by-build", "peer-invalidation", "epoch-summary"):
        with pytest.raises(EvidenceError) as err:
            compute(name, con, host=absent, epoch=3)
        message = str(err.value)
        assert "\n" not in message
        prefix = f"host {absent} is not in the warehouse; it holds 10 hosts, closest: "
        assert message.startswith(prefix), message
        closest = message.removeprefix(prefix).split(", ")
        assert closest[0] == FOCAL and len(closest) == 3 and set(closest) <= set(held)


def test_an_epoch_or_time_window_not_in_the_warehouse_names_what_it_holds(con):
    for name in ("votes-by-build", "peer-invalidation"):
        with pytest.raises(EvidenceError) as err:
            compute(name, con, host=FOCAL, epoch=99)
        assert str(err.value) == f"epoch 99 is not in the warehouse: it holds {HELD}"
    with pytest.raises(EvidenceError) as err:
        compute("votes-by-build", con, host=FOCAL, since="2020-01-01", until="2020-02-01")
    assert str(err.value) == (
        f"window [2020-01-01T00:00:00Z, 2020-02-01T00:00:00Z) is not in the warehouse: it holds {HELD}"
    )
    # A window that overlaps the data is answered, even where it reaches past it.
    result = compute("votes-by-build", con, host=FOCAL, since="2020-01-01", until="2026-10-25")
    assert result.rows.height > 0


def test_a_held_host_with_no_rows_in_a_held_epoch_still_gets_its_table(con):
    # A host that holds slots in the warehouse but none in epoch 4's escrows (the copy's newest epoch).
    idle = fetch_frame(
        con,
        "SELECT address FROM escrow_slots GROUP BY address "
        "HAVING count(*) FILTER (epoch_id = 4) = 0 ORDER BY address LIMIT 1",
    )["address"].to_list()
    assert idle, "the samples have a host with no slot in epoch 4"
    (host,) = idle
    result = compute("peer-invalidation", con, host=host, epoch=4)
    assert result.rows.height == 0
    assert f"host {host} executed no answers in epoch 4; nothing to compare." in result.notes
    votes = compute("votes-by-build", con, host=host, epoch=4)
    assert f"host {host} validated nothing in epoch 4." in votes.notes


def _cli(*args: str, cwd: Path) -> Done:
    """In-process: these are what a command says and exits with, no property of a process of its own."""
    return cli_in(cwd, *args)


def test_the_commands_exit_1_with_one_line_and_print_no_table(warehouse):
    cases = [
        (["evidence", "votes-by-build", "--host", "gonka1wrongaddr", "--epoch", "3"], "is not a gonka1… address"),
        (["evidence", "peer-invalidation", "--host", FOCAL, "--epoch", "99"], f"it holds {HELD}"),
        (["evidence", "votes-by-build", "--host", _neighbour(FOCAL)], "is not in the warehouse; it holds 10 hosts"),
        (["report", "epoch", "99", "--host", FOCAL], f"epoch 99 is not in the warehouse: it holds {HELD}"),
        (["report", "epoch", "3", "--host", _neighbour(FOCAL)], f"closest: {FOCAL}, "),
        (["builds", "check", "--host", _neighbour(FOCAL)], f"closest: {FOCAL}, "),
        (["builds", "infer", "--host", "gonka1nobody"], "is not a gonka1… address"),
    ]
    for args, expected in cases:
        done = _cli(*args, "--warehouse", str(warehouse), cwd=warehouse.parent)
        assert done.returncode == 1, (args, done.stderr)
        assert done.stdout == "", args  # no titled empty table, no provenance footer
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], (args, done.stderr)
    assert not (warehouse.parent / "out").exists()  # the refused reports wrote nothing


def test_a_malformed_host_is_refused_before_logs_or_a_config_are_read(tmp_path):
    """`ingest-logs` would file the logs under a host no copy names, and `run` would report on it: both
    refuse a typo in one line, and the warehouse is never created."""
    from pipeline.core.paths import DATA_SAMPLES_DIR

    typo = FOCAL[:-1] + ("q" if FOCAL[-1] != "q" else "p")  # one character off, the checksum kept
    warehouse = tmp_path / "w.duckdb"
    log = str(DATA_SAMPLES_DIR / "vllm" / "vllm.log")
    config = tmp_path / "c.toml"
    config.write_text(f'host = "{typo}"\nwarehouse = "w.duckdb"\n')
    cases = [
        (["ingest-logs", log, "--host", typo, "--year", "2026", "-w", str(warehouse)], f"--host '{typo}'"),
        (["run", "--config", str(config)], f"{config}: host '{typo}'"),
    ]
    for args, expected in cases:
        done = _cli(*args, cwd=tmp_path)
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert done.returncode == 1 and done.stdout == "", (args, done.stderr)
        assert lines == [f"error: {expected} is not a gonka1… address: it fails its bech32 checksum (a typo?)"], lines
    assert not warehouse.exists()
