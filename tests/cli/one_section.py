"""Epoch reports of one section, for tests of what a command does around its report (the host it is written
for, the directory it is written to, a run's log and outcome): a report of the samples builds fifteen evidence
sections, seconds of queries, while its heading, its checks of the host and the epoch, its provenance, its
files and the run's bookkeeping of it are the same for one."""

from __future__ import annotations

import pytest

SECTION = "votes-by-build"  # its table holds the en dash of a missing value, and it has a main finding


def one_section_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every epoch report built from now to the end of the test (`report`, `bundle`, `run`) holds only the
    SECTION evidence section; everything else about it is as ever."""
    from pipeline.output.report import model

    kept = {name: spec for name, spec in model.EVIDENCE.items() if name == SECTION}
    assert list(kept) == [SECTION] and kept[SECTION].report is not None
    monkeypatch.setattr(model, "EVIDENCE", kept)


def one_table_bundles(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every bundle built from now to the end of the test (`bundle`, and `verify`, which builds it again) holds
    only the SECTION evidence table, its charts and its manifest; everything else about it is as ever."""
    from pipeline.output import bundle

    kept = {name: spec for name, spec in bundle.EVIDENCE.items() if name == SECTION}
    assert list(kept) == [SECTION]
    monkeypatch.setattr(bundle, "EVIDENCE", kept)
