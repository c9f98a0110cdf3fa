"""JSON objects that give one key twice with two values: an ambiguous record, never read as the last value.

`json.loads` (and orjson, msgspec) keep the last of two members of one name in silence; a writer that
emits both meant one of them, and picking one would change the record without a word. The readers of
saved documents (ingest-json, PoC results, validator JSON lines) parse with `loads_unique`, which raises
`DuplicateKey` (a ValueError) naming the key, and quarantine the record or file with that reason. The
same key twice with the same value changes nothing and is accepted.
"""

from __future__ import annotations

from typing import Any

from pipeline.core.limits import loads_json


class DuplicateKey(ValueError):
    """An object of the document gives one key twice with two values."""


def unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """`object_pairs_hook` for `json.loads`: the object, or DuplicateKey when a key has two values."""
    members: dict[str, Any] = {}
    for key, value in pairs:
        if key in members and members[key] != value:
            raise DuplicateKey(f"key {key!r:.60} given twice with two values ({members[key]!r:.40}, {value!r:.40})")
        members[key] = value
    return members


def loads_unique(text: str | bytes, **options: Any) -> Any:
    """`json.loads` with `unique_members`, nested at most the depth limit (`loads_json`): DuplicateKey for a
    key given twice with two values, a ValueError for a document nested past the limit."""
    return loads_json(text, object_pairs_hook=unique_members, **options)
