"""Later decisions whose work a revert's rollback erases: they are re-made.

A revert rolls every sandboxed resource of the plan back to the corrected decision's
checkpoint group (or, for a resource first written after it, to its baseline). That erases
what every later decision wrote to those resources, including decisions outside the
affected subtree that the tree would otherwise still show as current and done. The rule
(docs/corrections.md, "What a revert keeps"): every current decision recorded after the
corrected one that wrote to a rolled-back resource is superseded and made again, in its
original order, on top of the rolled-back state — and so is everything that depended on it.

Re-making rather than re-applying the old tool calls: those calls were made against a state
that no longer exists (an edit's old text may be gone, a row's id may differ), and a
re-made decision is recorded and shown in the tree, so the tree always describes exactly
what the sandboxes hold.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.engine.core.restore_point import restore_point
from cleveragents_tui.store.correction_queries import decisions as decisions_by_id
from cleveragents_tui.store.correction_queries import writes_after
from cleveragents_tui.store.store import Store


@dataclass(frozen=True)
class RemadeDecision:
    """A current decision outside the affected subtree that a revert re-makes, because it
    wrote to ``resources``, which the revert rolls back to before it."""

    decision_id: str
    step_key: str | None
    chosen_option: str
    resources: tuple[str, ...]


def later_writers(
    store: Store,
    target: Decision,
    rolled_back: Iterable[str],
    affected: set[str],
    subtree_of: Callable[[list[str]], Iterable[str]],
) -> tuple[tuple[RemadeDecision, ...], set[str]]:
    """The decisions a revert of ``target`` re-makes because the rollback erases their writes,
    and the decisions that depended on them (``subtree_of``: the affected subtrees of these
    decisions, as one set). Decisions already in ``affected`` are left out of both. A fixed
    number of statements, whatever the number of writers."""
    rolled = set(rolled_back)
    if not rolled:
        return (), set()
    with store.unit_of_work() as uow:
        # The rollback restores this decision's group: what was written after it is erased.
        owner = restore_point(uow, target)
        writes = uow.run(writes_after, owner.plan_id, owner.sequence_number, rolled)
        written: dict[str, set[str]] = {}
        for decision_id, resource in writes:
            written.setdefault(decision_id, set()).add(resource)
        writers = [d for d in written if d not in affected]
        decisions = uow.run(decisions_by_id, writers)
    remade = tuple(
        RemadeDecision(
            decision_id=d,
            step_key=decisions[d].step_key,
            chosen_option=decisions[d].chosen_option,
            resources=tuple(sorted(written[d])),
        )
        for d in writers
    )
    followers = set(subtree_of(writers)) if writers else set()
    return remade, followers - affected
