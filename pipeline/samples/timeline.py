"""A host's whole history: every escrow's diff log over the spec's epochs, and its build windows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from .scenario import BuildWindow, Cast, EscrowPlan, EscrowPlanner, cast_for
from .spec import SampleSpec


@dataclass(frozen=True)
class Timeline:
    spec: SampleSpec
    cast: Cast
    escrows: tuple[EscrowPlan, ...]  # by epoch, then escrow id

    @property
    def focal_host(self) -> str:
        return self.cast.focal

    @property
    def builds(self) -> tuple[BuildWindow, ...]:
        return self.cast.builds

    def copy(self, last_epoch: int, malformed_payloads: bool = False, line: str | None = None):
        """The focal host's database as copied during `last_epoch` (epochs last_epoch-2 .. last_epoch);
        `malformed_payloads` adds a response that is not JSON and a truncated SSE stream; `line` is the
        writer's release line (release_lines.SAMPLE_LINES), which sets the migration lists, the
        snapshot format and whether an escrow was joined by import."""
        from .host_copy import HostCopy
        from .release_lines import DEFAULT_LINE

        return HostCopy.from_timeline(self, last_epoch, malformed_payloads, line or DEFAULT_LINE)

    def builds_toml(self) -> str:
        # The focal host is the one whose database this is; `gonka-evidence run` reports on it.
        blocks = [f'focal_host = "{self.focal_host}"\n']
        for window in self.builds:
            since = datetime.fromtimestamp(window.since, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            blocks.append(f'[[builds]]\nhost  = "{window.host}"\nlabel = "{window.label}"\nsince = "{since}"\n')
        return "\n".join(blocks)

    def write_builds_toml(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.builds_toml(), encoding="utf-8")
        return path


def generate_timeline(spec: SampleSpec | None = None) -> Timeline:
    """Plan every escrow of the spec. Deterministic: one spec, one timeline, the same bytes."""
    spec = spec or SampleSpec()
    cast = cast_for(spec)
    escrows = tuple(
        EscrowPlanner(spec, cast, epoch_id, index).plan()
        for epoch_id in spec.epochs
        for index in range(spec.escrows_per_epoch)
    )
    return Timeline(spec, cast, escrows)
