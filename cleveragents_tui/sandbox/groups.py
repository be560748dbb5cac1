"""The checkpoint budget: which checkpoints to prune when a resource has too many.

Priority (ADR-035, "Checkpoint Budget Considerations"): the first checkpoint and the most
recent one are always kept; past the budget, regular ``pre_write`` checkpoints go before
decision-linked ones, oldest first. Markers of ``none`` resources cost nothing and are never
counted or pruned.
"""

from __future__ import annotations

from collections.abc import Sequence

from cleveragents_tui.domain.checkpoint import CheckpointMetadata
from cleveragents_tui.domain.enums import CheckpointType


def select_for_pruning(
    checkpoints: Sequence[CheckpointMetadata], budget: int
) -> list[CheckpointMetadata]:
    """The checkpoints to prune so that at most ``budget`` live ones remain.

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
    pre_write = [c for c in middle if c.checkpoint_type is CheckpointType.PRE_WRITE]
    decision_linked = [c for c in middle if c.checkpoint_type is CheckpointType.DECISION_POINT]
    return (pre_write + decision_linked)[:excess]
