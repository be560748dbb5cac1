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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cleveragents_tui.domain.decision import Decision


@dataclass(frozen=True)
class RemadeDecision:
    """A current decision outside the affected subtree that a revert re-makes, because it
    wrote to ``resources``, which the revert rolls back to before it."""

    decision_id: str
    step_key: str | None
    chosen_option: str
    resources: tuple[str, ...]


def remade_from(
    writes: Iterable[tuple[str, str]], writers: Mapping[str, Decision], affected: set[str]
) -> tuple[RemadeDecision, ...]:
    """The decisions a revert re-makes because the rollback erases their writes: of
    ``writes`` ((decision, resource) of the calls that wrote to a rolled-back resource after
    the revert's restore point, in the order made), those by decisions not in ``affected``
    (``writers``: those decisions, by id). Their dependents are affected too: the snapshot
    reads them (engine/correct/snapshot.py). A decision under another one named here (a
    failed call's retries) is not named: it goes with that one's subtree."""
    written: dict[str, set[str]] = {}
    for decision_id, resource in writes:
        written.setdefault(decision_id, set()).add(resource)
    return tuple(
        RemadeDecision(
            decision_id=d,
            step_key=writers[d].step_key,
            chosen_option=writers[d].chosen_option,
            resources=tuple(sorted(resources)),
        )
        for d, resources in written.items()
        if d not in affected and writers[d].parent_decision_id not in written
    )
