"""Evidence tables: one module per table, each returning an `EvidenceResult`.

    from pipeline.evidence import compute
    result = compute("votes-by-build", con, host="gonka1…", epoch=437,
                     command="gonka-evidence evidence votes-by-build --host gonka1… --epoch 437")

`compute` checks the request, runs the table on the warehouse views and attaches
the provenance footer. User errors raise `EvidenceError` with a one-line message.
A host that executed or validated nothing is not an error: the table is empty and
says so in its notes.
"""

from __future__ import annotations

import datetime as dt
import inspect
from collections.abc import Callable
from typing import Any

import duckdb

from pipeline.evidence.acceptance import acceptance
from pipeline.evidence.answer_integrity import answer_integrity
from pipeline.evidence.answers_by_sampling import answers_by_sampling
from pipeline.evidence.epoch_summary import epoch_summary
from pipeline.evidence.peer_invalidation import peer_invalidation
from pipeline.evidence.poc import poc
from pipeline.evidence.provenance import provenance
from pipeline.evidence.result import EvidenceResult, Provenance
from pipeline.evidence.similarity import similarity
from pipeline.evidence.stability import stability
from pipeline.evidence.tracker import tracker
from pipeline.evidence.votes_by_build import votes_by_build
from pipeline.evidence.window import EvidenceError, Window

# Public names (design.md §6) → table function (con, host, window[, by_escrow=...]).
EVIDENCE: dict[str, Callable[..., EvidenceResult]] = {
    "votes-by-build": votes_by_build,
    "epoch-summary": epoch_summary,
    "peer-invalidation": peer_invalidation,
    "tracker": tracker,
    "answers-by-sampling": answers_by_sampling,
    "answer-integrity": answer_integrity,
    "acceptance": acceptance,
    "stability": stability,
    "similarity": similarity,
    "poc": poc,
}


# Tables that can run without --host when asked for every participant (--all).
ALL_PARTICIPANT_TABLES = {"tracker"}


def compute(
    name: str,
    con: duckdb.DuckDBPyConnection,
    *,
    host: str | None,
    epoch: int | str | None = None,
    since: dt.datetime | str | None = None,
    until: dt.datetime | str | None = None,
    by_escrow: bool = False,
    command: str,
    **extra: Any,
) -> EvidenceResult:
    """The evidence table `name` for `host` over all data, one epoch, or ``[since, until)``.

    ``since``/``until`` are datetimes or ISO-8601 strings (naive = UTC) and go together;
    ``epoch`` excludes them. ``by_escrow`` is accepted by tables that have per-escrow rows.
    ``command`` is the exact command line that reproduces the table (provenance footer).
    Other keyword options go to the tables that accept them (e.g. ``all_participants``,
    ``compare``, ``detail``, ``by``).
    """
    try:
        table = EVIDENCE[name]
    except KeyError:
        raise EvidenceError(f"unknown evidence table {name!r}; choose one of {', '.join(EVIDENCE)}") from None
    host = str(host).strip() if host is not None and str(host).strip() else None
    if host is None and not (extra.get("all_participants") and name in ALL_PARTICIPANT_TABLES):
        raise EvidenceError(f"{name} needs --host ADDR (the host address, gonka1…)")
    window = Window.parse(epoch=epoch, since=since, until=until)
    # Table-specific options (by_escrow, all_participants, compare, detail, ...) reach only the
    # tables whose function accepts them; a set option the table does not know is a user error.
    options: dict[str, Any] = {}
    accepted = inspect.signature(table).parameters
    for option, value in {"by_escrow": by_escrow, **extra}.items():
        if value in (None, False):
            continue
        if option not in accepted:
            raise EvidenceError(f"--{option.replace('_', '-')} is not available for {name}")
        options[option] = value
    result = table(con, host, window, **options)
    result.provenance = provenance(con, window, command)
    return result


__all__ = ["EVIDENCE", "EvidenceError", "EvidenceResult", "Provenance", "Window", "compute"]
