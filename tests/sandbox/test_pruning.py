"""The checkpoint budget keeps the first, the most recent, then decision-linked before pre-write."""

from __future__ import annotations

from datetime import timedelta

from cleveragents_tui.domain.checkpoint import CheckpointMetadata
from cleveragents_tui.domain.enums import CheckpointType
from cleveragents_tui.domain.ids import new_ulid
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.sandbox.groups import select_for_pruning

PLAN = new_ulid()
START = utc_now()


def checkpoints(kinds: str) -> list[CheckpointMetadata]:
    """'d' decision_point, 'p' pre_write, 'n' non_rollbackable marker; oldest first."""
    out = []
    for i, kind in enumerate(kinds):
        ctype = {
            "d": CheckpointType.DECISION_POINT,
            "p": CheckpointType.PRE_WRITE,
            "n": CheckpointType.NON_ROLLBACKABLE,
        }[kind]
        out.append(
            CheckpointMetadata(
                plan_id=PLAN,
                decision_id=None if kind == "p" else new_ulid(),
                resource_id="local/repo",
                checkpoint_type=ctype,
                strategy="none" if kind == "n" else "filesystem_copy",
                ref=f"ref-{i}",
                created_at=START + timedelta(seconds=i),
            )
        )
    return out


def refs(selected: list[CheckpointMetadata]) -> list[str]:
    return [c.ref for c in selected]


def test_under_budget_nothing_is_pruned() -> None:
    assert select_for_pruning(checkpoints("pdpd"), budget=4) == []


def test_pre_write_checkpoints_go_first_oldest_first() -> None:
    #            0123456
    chosen = select_for_pruning(checkpoints("pdpdpdp"), budget=5)
    assert refs(chosen) == ["ref-2", "ref-4"]


def test_decision_checkpoints_go_only_when_no_pre_write_is_left() -> None:
    chosen = select_for_pruning(checkpoints("pdpdddp"), budget=3)
    assert refs(chosen) == ["ref-2", "ref-1", "ref-3", "ref-4"]


def test_the_newest_pre_write_stays_for_the_retry_of_the_last_call() -> None:
    # a call's pre_write (ref-2), then its failure's retry decision (ref-3): the retry
    # restores ref-2, so a decision checkpoint goes instead
    assert refs(select_for_pruning(checkpoints("pdpd"), budget=3)) == ["ref-1"]
    # and when nothing else could go, the resource stays one over its budget
    assert select_for_pruning(checkpoints("ppd"), budget=2) == []


def test_the_first_and_the_most_recent_always_stay() -> None:
    items = checkpoints("pppppp")
    chosen = select_for_pruning(items, budget=2)
    assert refs(chosen) == ["ref-1", "ref-2", "ref-3", "ref-4"]
    assert select_for_pruning(items, budget=1) == chosen  # a budget below 2 still keeps both ends


def test_markers_and_already_pruned_checkpoints_do_not_count() -> None:
    items = checkpoints("pnnnnd")
    assert select_for_pruning(items, budget=2) == []
    items = checkpoints("pdpd")
    items[1] = items[1].model_copy(update={"pruned_at": START})
    assert select_for_pruning(items, budget=3) == []


def test_more_checkpoints_than_the_budget_end_at_the_budget() -> None:
    items = checkpoints("p" + "dp" * 60)
    chosen = select_for_pruning(items, budget=50)
    remaining = [c for c in items if c not in chosen]
    assert len(remaining) == 50
    assert remaining[0] is items[0] and remaining[-1] is items[-1]
    assert all(c.checkpoint_type is CheckpointType.DECISION_POINT for c in remaining[1:-1])
