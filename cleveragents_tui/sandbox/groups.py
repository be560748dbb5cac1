"""The checkpoint budget: which checkpoints to prune when a resource has too many.

Priority (ADR-035, "Checkpoint Budget Considerations"): the first checkpoint and the most
recent one are always kept; past the budget, regular ``pre_write`` checkpoints go before
decision-linked ones, oldest first. Markers of ``none`` resources cost nothing and are never
counted or pruned.

The newest ``pre_write`` checkpoint is kept too, even when that leaves one checkpoint over
the budget: it is the state before the call that ran last, which a failed call's retry
restores (engine/run/restore_on_failure.py), and the retry's own decision checkpoint is what
pushes the count over the budget. Pruning it left the retry nothing to restore, so it ran
on top of the failed run's half-done work.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, TypeVar

from cleveragents_tui.domain.enums import CheckpointType


class Prunable(Protocol):
    """What the choice reads of a checkpoint (a ``CheckpointMetadata``, or the recording's
    lighter ``LiveCheckpoint`` row)."""

    @property
    def checkpoint_type(self) -> CheckpointType: ...

    @property
    def pruned_at(self) -> datetime | None: ...


C = TypeVar("C", bound=Prunable)


def select_for_pruning(checkpoints: Sequence[C], budget: int) -> list[C]:
    """The checkpoints to prune so that at most ``budget`` live ones remain (one more
    when the newest ``pre_write`` is all the budget could still take).

    ``checkpoints`` are one resource's in one plan, oldest first; pruned ones and markers are
    ignored.
    """
    live = [
        c
        for c in checkpoints
        if c.pruned_at is None and c.checkpoint_type is not CheckpointType.NON_ROLLBACKABLE
    ]
    excess = len(live) - max(budget, 2)
    if excess <= 0:
        return []
    middle = live[1:-1]
    newest = _newest_pre_write(live)  # the state a retry of the last call restores
    pre_write = [
        c for c in middle if c.checkpoint_type is CheckpointType.PRE_WRITE and c is not newest
    ]
    decision_linked = [c for c in middle if c.checkpoint_type is CheckpointType.DECISION_POINT]
    return (pre_write + decision_linked)[:excess]


def _newest_pre_write(live: Sequence[C]) -> C | None:
    return next((c for c in reversed(live) if c.checkpoint_type is CheckpointType.PRE_WRITE), None)
