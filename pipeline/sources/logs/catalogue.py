"""The death and out-of-memory texts of vLLM (`vllm_catalogue.toml`, derived from vLLM's source by
bench/vllm_catalogue.py): the one definition of what in a log says an engine ended or ran out of memory.

A catalogue text is matched as written, with `{}` (a placeholder in vLLM's source) standing for a word.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from importlib.resources import files

EVENTS = ("fatal", "engine_dead", "worker_died", "oom")


@dataclass(frozen=True)
class Entry:
    text: str
    kind: str  # death | oom
    event: str  # the engine event kind (EVENTS)
    origin: str  # vllm | vllm-ascend | runtime
    since: str | None = None
    until: str | None = None
    files: tuple[str, ...] = ()
    source: str | None = None
    note: str | None = None  # where a text newer than the scanned releases was read

    @property
    def regex(self) -> str:
        """The text as a regular expression (Python `re`): literal pieces, `{}` = a run of non-space characters
        (a name, a pid, a number; a placeholder that ends the text matches nothing, so any text may follow)."""
        return r"\S*?".join(re.escape(piece) for piece in self.text.split("{}"))

    @property
    def literal(self) -> str:
        """The longest literal piece: every line the text matches contains it (a cheap filter)."""
        return max(self.text.split("{}"), key=len)


def _load() -> tuple[Entry, ...]:
    raw = tomllib.loads(files("pipeline.sources.logs").joinpath("vllm_catalogue.toml").read_text("utf-8"))
    out = []
    for e in raw["entry"]:
        entry = Entry(
            text=e["text"],
            kind=e["kind"],
            event=e["event"],
            origin=e["origin"],
            since=e.get("since"),
            until=e.get("until"),
            files=tuple(e.get("files", ())),
            source=e.get("source"),
            note=e.get("note"),
        )
        if entry.event not in EVENTS or entry.kind != ("oom" if entry.event == "oom" else "death"):
            raise ValueError(f"vllm_catalogue.toml: {entry.text!r} has kind {entry.kind!r} / event {entry.event!r}")
        out.append(entry)
    return tuple(out)


ENTRIES = _load()


def _union(event_kinds: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{e.regex})" for e in ENTRIES if e.event in event_kinds))


FATAL = _union(("fatal",))  # the engine core's own last words
ENGINE_DEAD = _union(("engine_dead",))  # the front end or launcher: the engine is gone
WORKER_DIED = _union(("worker_died",))
DEATH = _union(("fatal", "engine_dead", "worker_died"))  # any death text (in a traceback too)
OOM = _union(("oom",))
LITERALS = sorted({e.literal for e in ENTRIES})  # a line holding a catalogue text holds one of these


def classify(text: str) -> list[str]:
    """The catalogue kinds (death, oom) of a text: what a line holding it says."""
    return [kind for kind, rx in (("death", DEATH), ("oom", OOM)) if rx.search(text)]
