"""The ``none`` strategy: no isolation; changes go straight to the real resource.

Used for external APIs and anything else that cannot be sandboxed (ADR-035, "No rollback"
tier). A checkpoint is only a marker, ``none:<ULID>``, stored as a ``non_rollbackable``
checkpoint row so that corrections can warn that this resource keeps its changes. Markers
hold no state, so they stay valid across restarts and ``open`` needs nothing from ``root``.

Nothing records what changed, so ``diff``, ``read`` and ``changes_since_baseline`` raise
:class:`SandboxError` rather than claim that nothing changed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.domain.ids import new_ulid
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.base import (
    ApplyResult,
    Change,
    CheckpointMissingError,
    OfPlan,
    SandboxError,
)

MARKER_PREFIX: Final = "none:"
_MARKER = re.compile(r"^none:[0-7][0-9A-HJKMNP-TV-Z]{25}$")


class NoneSandbox(OfPlan):
    """The real resource itself; checkpoints are markers and rollback is refused."""

    def __init__(self, resource: Resource, plan_id: str) -> None:
        self._resource = resource
        self._plan_id = plan_id

    @property
    def workdir(self) -> Path | None:
        """The resource location when it is a directory (tools work on it directly)."""
        location = Path(self._resource.location).expanduser()
        return location if location.is_dir() else None

    def _not_recorded(self, what: str) -> SandboxError:
        return SandboxError(
            f"{what} of resource {self._resource.resource_id} is not recorded (sandbox "
            "strategy: none): its changes went straight to the real resource",
            "inspect the resource itself",
        )

    def checkpoint(self) -> str:
        """A fresh ``none:<ULID>`` marker; nothing is captured."""
        return MARKER_PREFIX + new_ulid()

    def verify(self, ref: str) -> None:
        """Any well-formed marker is intact: there is nothing behind it to lose."""
        if not _MARKER.match(ref):
            raise CheckpointMissingError(
                f"{ref!r} is not a checkpoint of resource {self._resource.resource_id} "
                "(sandbox strategy: none makes only none:<ULID> markers)",
                "pick a checkpoint recorded for this resource",
            )

    def rollback(self, ref: str, *, current: str | None = None) -> None:
        self.verify(ref)
        raise SandboxError(
            f"resource {self._resource.resource_id} cannot be rolled back (sandbox strategy: "
            "none): its changes since the decision stay",
            "correct with --mode=append to add compensating changes, or give the resource a "
            "rollbackable sandbox strategy",
        )

    def diff(self, old_ref: str, new_ref: str) -> list[Change]:
        self.verify(old_ref)
        self.verify(new_ref)
        raise self._not_recorded("what changed between two checkpoints")

    def read(self, ref: str, path: str) -> bytes | None:
        self.verify(ref)
        raise self._not_recorded(f"the content of {path!r} at a checkpoint")

    def changes_since_baseline(self) -> list[Change]:
        raise self._not_recorded("what changed")

    def drop_checkpoint(self, ref: str) -> None:
        """Markers hold nothing; only the reference is checked."""
        self.verify(ref)

    def apply(self) -> ApplyResult:
        return ApplyResult(
            summary=f"nothing to apply for {self._resource.resource_id}: its changes went "
            "straight to the real resource (sandbox strategy: none)",
            changes=(),
        )

    def discard(self) -> None:
        """Nothing to remove. The real resource keeps the changes already made to it."""


class NoneStrategy:
    """Makes :class:`NoneSandbox` objects; ``root`` is not used."""

    name: SandboxStrategyName = SandboxStrategyName.NONE

    def create(self, resource: Resource, plan_id: str, root: Path) -> NoneSandbox:
        return NoneSandbox(resource, plan_id)

    def open(self, resource: Resource, plan_id: str, root: Path) -> NoneSandbox:
        return NoneSandbox(resource, plan_id)
