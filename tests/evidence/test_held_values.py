"""Every value that names a host, epoch, build or escrow is checked where it enters, whatever the way
(pipeline/warehouse/held.py): named-query parameters, builds.toml entries, `ingest-logs --host`, the run
configuration's host, `run` for a host with no slot, `network evidence` options. A malformed value is
refused as such, a well-formed one the warehouse does not hold is refused naming what it holds; an
all-upper-case address is folded to lower case."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.core.address import sample_address
from pipeline.core.paths import DATA_SAMPLES_DIR
from pipeline.evidence import EvidenceError
from pipeline.warehouse.database import open_read_only
from tests.factories import data_samples_warehouse
from tests.helpers import Done, cli_in

FOCAL = "gonka1qapr9h4kxl5qe4y9wvr6ql7zqhadhjkvvrl4lx"  # data-samples/builds.toml focal_host
TYPO = FOCAL[:-1] + "q"  # one character off: fails the checksum
NO_SLOT = sample_address("n0s7ut")  # well-formed, in no escrow of the samples
HELD = "epochs 2–4 (2026-10-19T07:13:23Z to 2026-10-30T06:16:21Z)"  # what data-samples/ holds
LOG = str(DATA_SAMPLES_DIR / "vllm" / "vllm.log")


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Path:
    return data_samples_warehouse(tmp_path_factory.mktemp("values") / "w.duckdb", vllm_log_host=FOCAL)


def _cli(*args: str, cwd: Path) -> Done:
    """In-process: these are what a command says and exits with, no property of a process of its own."""
    return cli_in(cwd, *args)


def _one_error(done: Done) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1 and done.stdout == "" and len(lines) == 1, (done.returncode, done.stderr)
    assert lines[0].startswith("error: ")
    return lines[0]


def test_named_query_parameters_are_checked(warehouse):
    """Before: `--param host=` with a checksum typo or `--param epoch=99` printed an empty table, exit 0."""
    w = ("--warehouse", str(warehouse), "--format", "csv")
    typo = _one_error(
        _cli("query", "escrows_of_epoch", "--param", f"host={TYPO}", "--param", "epoch=3", *w, cwd=warehouse.parent)
    )
    assert "--param host=" in typo and "fails its bech32 checksum (a typo?); closest in the warehouse: " + FOCAL in typo
    epoch = _one_error(
        _cli("query", "escrows_of_epoch", "--param", f"host={FOCAL}", "--param", "epoch=99", *w, cwd=warehouse.parent)
    )
    assert epoch == f"error: epoch 99 is not in the warehouse: it holds {HELD}"
    unheld = _one_error(_cli("query", "host_executor_counts", "--param", f"host={NO_SLOT}", *w, cwd=warehouse.parent))
    assert f"host {NO_SLOT} is not in the warehouse; it holds " in unheld
    lower = _cli(
        "query", "escrows_of_epoch", "--param", f"host={FOCAL}", "--param", "epoch=3", *w, cwd=warehouse.parent
    )
    upper = _cli(
        "query", "escrows_of_epoch", "--param", f"host={FOCAL.upper()}", "--param", "epoch=3", *w, cwd=warehouse.parent
    )
    assert upper.returncode == 0 and upper.stdout == lower.stdout  # the same host, folded to lower case


def test_a_parameter_the_query_does_not_use_is_refused(warehouse):
    """`query epoch_summary --param epoch=99` printed every epoch, exit 0: a parameter the query does not
    use was dropped without a word, so a typo in its name (or a query without it) read as an answer."""
    w = ("--warehouse", str(warehouse), "--format", "csv")
    line = _one_error(_cli("query", "epoch_summary", "--param", "epoch=99", *w, cwd=warehouse.parent))
    assert line == "error: --param epoch: the query uses no $epoch (it takes no parameter)"
    line = _one_error(
        _cli("query", "escrows_of_epoch", "--param", "epoch=3", "--param", f"hots={FOCAL}", *w, cwd=warehouse.parent)
    )
    assert line == "error: --param hots: the query uses no $hots (it takes $epoch, $host)"


def test_evidence_table_options_that_name_a_host_or_epoch_are_checked(warehouse):
    """`evidence peer-invalidation --control` with a checksum typo, or an address holding no slot, and
    `evidence tracker --compare 99` printed "_no rows_" or "compare: none" with a footer, exit 0."""
    w = ("--warehouse", str(warehouse))
    peer = ("evidence", "peer-invalidation", "--host", FOCAL, "--epoch", "3")
    typo = _one_error(_cli(*peer, "--control", TYPO, *w, cwd=warehouse.parent))
    assert typo.startswith(f"error: --control {TYPO!r} is not a gonka1… address: it fails its bech32 checksum")
    unheld = _one_error(_cli(*peer, "--control", NO_SLOT, *w, cwd=warehouse.parent))
    assert unheld.startswith(f"error: --control: host {NO_SLOT} holds no slot in the warehouse's escrows; it holds ")
    compare = _one_error(
        _cli("evidence", "tracker", "--host", FOCAL, "--epoch", "3", "--compare", "99", *w, cwd=warehouse.parent)
    )
    assert compare == f"error: --compare: epoch 99 is not in the warehouse: it holds {HELD}"


def test_builds_check_refuses_a_mistyped_address_in_the_file(warehouse, tmp_path):
    """Before: a builds.toml with one address mistyped passed `builds check` ("consistent", exit 0)."""
    text = (DATA_SAMPLES_DIR / "builds.toml").read_text()
    assert FOCAL in text
    typo = tmp_path / "typo.toml"
    entry = f'host  = "{FOCAL}"\nlabel = "V2 + DSpark, raw_logprobs"'
    assert entry in text
    typo.write_text(text.replace(entry, entry.replace(FOCAL, TYPO)))  # one entry's address mistyped
    line = _one_error(_cli("builds", "check", str(typo), "--warehouse", str(warehouse), cwd=tmp_path))
    assert f"host {TYPO!r} is not a gonka1… address: it fails its bech32 checksum" in line
    unheld = tmp_path / "unheld.toml"
    unheld.write_text(text.replace(FOCAL, NO_SLOT))
    line = _one_error(_cli("builds", "check", str(unheld), "--warehouse", str(warehouse), cwd=tmp_path))
    assert f"host {NO_SLOT} is not in the warehouse; it holds " in line


def test_ingest_logs_refuses_a_host_in_no_escrow_and_folds_upper_case(warehouse, tmp_path):
    """Before: `ingest-logs --host` took a well-formed address in no escrow, and an all-upper-case one was
    stored as typed (a log landing under a host no escrow has)."""
    own = tmp_path / "w.duckdb"
    own.write_bytes(warehouse.read_bytes())
    args = ("ingest-logs", LOG, "--year", "2026", "--warehouse", str(own))
    line = _one_error(_cli(*args, "--host", NO_SLOT, cwd=tmp_path))
    assert line.startswith(f"error: host {NO_SLOT} holds no slot in the warehouse's escrows; it holds 10 slot holders")
    other = "gonka1vd2rragg2cycdlzhqzdakt3cuhqj3cd8f9kwme"  # holds slots of data-samples/ in epoch 2
    done = _cli(*args, "--host", other.upper(), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    con = open_read_only(own)
    try:
        hosts = {h for (h,) in con.execute("SELECT DISTINCT host FROM log_files").fetchall()}
    finally:
        con.close()
    assert other in hosts and NO_SLOT not in hosts and other.upper() not in hosts


def test_run_refuses_a_host_with_no_slot_and_writes_no_report(tmp_path):
    """Before: `run` for a well-formed host with no slot wrote reports ("executed by the host: 0 of 460")."""
    for name, sources in (
        (
            "with-log",
            f'[[sources]]\npath = "{DATA_SAMPLES_DIR / "store"}"\n'
            f'[[sources]]\npath = "{LOG}"\nkind = "vllm"\nyear = 2026\n',
        ),
        ("store-only", f'[[sources]]\npath = "{DATA_SAMPLES_DIR / "store"}"\n'),
    ):
        root = tmp_path / name
        root.mkdir()
        (root / "c.toml").write_text(f'host = "{NO_SLOT}"\nwarehouse = "w.duckdb"\noutput = "out"\n{sources}')
        done = _cli("run", "--config", str(root / "c.toml"), cwd=root)
        assert done.returncode == 1, done.stderr  # the run's log is on stdout; its error the one line on stderr
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and f"error: {root / 'c.toml'}: host" not in lines[0], lines
        assert lines[0].startswith(f"error: host {NO_SLOT} holds no slot in the warehouse's escrows"), lines
        assert not list(root.glob("out/epoch-*")), name


def test_the_configured_host_is_folded_to_lower_case(tmp_path):
    from pipeline.jobs.config import load_config

    config = tmp_path / "c.toml"
    config.write_text(f'host = "{FOCAL.upper()}"\n')
    assert load_config(config).host == FOCAL


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    from pipeline.network.jobs import network_ingest
    from pipeline.samples.network import write_network

    root = tmp_path_factory.mktemp("lake")
    truth = write_network(root / "copies", hosts=2)  # two hosts' copies: a lake of several, all the checks need
    network_ingest([str(root / "copies" / name) for name in truth.copies], root / "lake", workers=0, buckets=1)
    return root / "lake", truth


def test_network_evidence_checks_epoch_host_and_control_against_the_lake(lake):
    """Before: `network evidence --epoch 99` and a `--control` address not in the lake printed `_no rows_` with
    statistics and a footer, exit 0."""
    from pipeline.network.jobs import network_evidence

    path, truth = lake
    with pytest.raises(EvidenceError, match=r"^epoch 99 is not in the lake: it holds epochs? \d"):
        network_evidence("executors", path, epoch=99, workers=0)
    with pytest.raises(EvidenceError, match=rf"^host {NO_SLOT} holds no slot in the lake's escrows; it holds "):
        network_evidence("peer-invalidation", path, host=truth.focal_host, control=NO_SLOT, workers=0)
    result = network_evidence("peer-invalidation", path, host=truth.focal_host.upper(), workers=0)
    assert result.params.get("host", truth.focal_host) == truth.focal_host


def test_a_report_for_a_host_with_no_slot_is_refused(warehouse, tmp_path):
    """A host the warehouse knows only from its build timeline holds no slot: before, `report` wrote a report
    of it ("executed by the host: 0 of 460"); now one line and no report."""
    own = tmp_path / "w.duckdb"
    own.write_bytes(warehouse.read_bytes())
    builds = tmp_path / "builds.toml"
    builds.write_text(f'[[builds]]\nhost = "{NO_SLOT}"\nlabel = "x"\nsince = 2026-10-01T00:00:00Z\n')
    loaded = _cli("builds", "load", str(builds), "--warehouse", str(own), cwd=tmp_path)
    assert loaded.returncode == 0, loaded.stderr
    line = _one_error(_cli("report", "epoch", "3", "--host", NO_SLOT, "--warehouse", str(own), cwd=tmp_path))
    assert line.startswith(f"error: host {NO_SLOT} holds no slot in the warehouse's escrows; it holds 10 slot holders")
    assert not (tmp_path / "out").exists()
