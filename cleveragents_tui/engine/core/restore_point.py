"""Which decision's checkpoint group holds the state a current decision stands on now.

A decision's own checkpoint group is the state of the resources when it was recorded. A
later correction can roll the resources back *past* a decision it keeps current (the
decision wrote nothing the rollback erased, so it was not re-made): the corrected decision's
old work is gone, its replacement was made afterwards, and the kept decision's group still
holds the old attempt. In the plan as it stands, the kept decision sits on the state that
correction restored — the group of the decision it corrected, itself resolved the same way.
A correction's guidance decision has no group of its own and sits on that state too.

Rolling back to a decision, and finding the later decisions whose writes that erases
(engine/correct/later_writers.py), both start from this restore point.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, TypeVar

from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.store.snapshot_reads import decisions, guidance_decisions
from cleveragents_tui.store.unit_of_work import UnitOfWork


class Placed(Protocol):
    """What a restore point is found from: a decision, or its light tree row."""

    @property
    def decision_id(self) -> str: ...

    @property
    def sequence_number(self) -> int: ...


PlacedT = TypeVar("PlacedT", bound=Placed)


def restore_point(uow: UnitOfWork, decision: Decision) -> Decision:
    """The decision whose checkpoint group is the state ``decision`` stands on now."""
    return restore_points(uow, decision.plan_id, [decision])[decision.decision_id]


def restore_points(
    uow: UnitOfWork, plan_id: str, wanted: Sequence[PlacedT]
) -> dict[str, PlacedT | Decision]:
    """:func:`restore_point` of each of ``wanted`` (decisions of ``plan_id``, or their tree
    rows), reading the plan's corrections once."""
    guidance = [d for d in uow.run(guidance_decisions, plan_id) if d.corrects_decision_id]
    found = uow.run(decisions, {str(g.corrects_decision_id) for g in guidance})
    corrected = {g.decision_id: found[str(g.corrects_decision_id)] for g in guidance}
    return {d.decision_id: restore_point_among(d, guidance, corrected) for d in wanted}


def restore_point_among(
    decision: PlacedT, guidance: Sequence[Decision], corrected: Mapping[str, Decision]
) -> PlacedT | Decision:
    """:func:`restore_point` from the plan's guidance decisions that correct a decision
    (``guidance``) and what each corrected (``corrected``, by guidance decision id)."""
    owner: PlacedT | Decision = decision
    limit: int | None = None  # only corrections made before this one count
    while True:
        if owner.decision_id in corrected:  # a guidance decision: the state it was made in
            owner, limit = corrected[owner.decision_id], owner.sequence_number
            continue
        spanning = [
            g
            for g in guidance
            if (limit is None or g.sequence_number < limit)
            and corrected[g.decision_id].sequence_number < owner.sequence_number < g.sequence_number
        ]
        if not spanning:
            return owner
        latest = max(spanning, key=lambda g: g.sequence_number)
        owner, limit = corrected[latest.decision_id], latest.sequence_number
