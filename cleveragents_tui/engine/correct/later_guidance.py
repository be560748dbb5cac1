"""Guidance of earlier corrections that a revert's restored actor state lacks (issue 20, 5).

A revert restores the actor from the LangGraph checkpoint the corrected decision was made
from. Guidance an earlier correction gave to a *later* decision was added to the actor
after that checkpoint, so the restored state lacks it, and the replay would re-make that
later decision without it.

What happens to it follows the tree. The earlier correction's guidance decision (its
``user_intervention``) either stays current after this revert — its correction stands, so
its guidance is **carried forward**: put back into the restored state, before the new
guidance, so the decisions the replay re-makes still follow it — or this revert supersedes
it (it depended on the corrected decision, or it is Execute work a Strategize revert undoes)
— then its guidance is **dropped** with it, and the preview warns. Either way the preview
names it. Carrying forward keeps the rule that a corrected plan applies what a fresh plan
taking the tree's current choices applies: a correction that stands is one of those choices.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import Phase
from cleveragents_tui.store.store import Store

CORRECTION_KEY = "correction:"  # the step key prefix of a correction's guidance decision


@dataclass(frozen=True)
class LaterGuidance:
    """One guidance entry the restored actor state lacks."""

    phase: Phase  # the actor it was given to
    key: str  # the step it aims at ("*": every step)
    text: str
    decision_id: str | None  # the guidance decision that recorded it (None: not found)
    entry: dict[str, str]  # as the actor holds it (with the alternative pinned, if any)


Lost = tuple[tuple[Phase, dict[str, str]], ...]  # (the actor's phase, its guidance entry)


def lost_guidance(store: Store, target: Decision, phase_change: tuple[Phase, Phase] | None) -> Lost:
    """The guidance entries in the actors' current states that the states a revert of
    ``target`` restores lack (read from the LangGraph checkpoints; only reads)."""
    from cleveragents_tui.actors.checkpointer import open_checkpointer  # see runner._run_actor
    from cleveragents_tui.actors.graphs import Actor

    lost: list[tuple[Phase, dict[str, str]]] = []
    with open_checkpointer(store.engine.url) as saver:
        ref = target.context_snapshot.actor_state_ref
        if ref is not None:  # the state _reasoning_rollback forks from
            actor = Actor(saver, target.plan_id, target.phase, lambda state, r: {})
            lost += _missing(target.phase, actor.state(), actor.load(ref)["guidance"])
        if phase_change and phase_change[1] is Phase.STRATEGIZE:
            execution = Actor(saver, target.plan_id, Phase.EXECUTE, lambda state, r: {})
            first = execution.first_checkpoint()
            if first is not None:
                start = execution.load(first)["guidance"]
                lost += _missing(Phase.EXECUTE, execution.state(), start)
    return tuple(lost)


def later_guidance(
    lost: Lost, given: Sequence[Decision], affected: set[str]
) -> tuple[tuple[LaterGuidance, ...], tuple[LaterGuidance, ...]]:
    """(carried forward, dropped): each ``lost`` entry, by whether the correction that gave
    it (the newest of ``given``, the plan's correction guidance decisions, with its text)
    stands after the revert, which supersedes ``affected``."""
    carried: list[LaterGuidance] = []
    dropped: list[LaterGuidance] = []
    for phase, entry in lost:
        source = _source(given, entry)
        found = LaterGuidance(
            phase,
            entry.get("key", "*"),
            entry.get("text", ""),
            source.decision_id if source else None,
            entry,
        )
        stands = (
            source is not None
            and source.superseded_by is None
            and source.decision_id not in affected
        )
        (carried if stands else dropped).append(found)
    return tuple(carried), tuple(dropped)


def _missing(
    phase: Phase, current: object, restored: list[dict[str, str]]
) -> list[tuple[Phase, dict[str, str]]]:
    entries = current.get("guidance", []) if isinstance(current, dict) else []
    unique = [e for n, e in enumerate(entries) if e not in entries[:n]]
    return [(phase, e) for e in unique if e not in restored]


def _source(given: Sequence[Decision], entry: dict[str, str]) -> Decision | None:
    """The newest guidance decision with the entry's text, one aimed at its key first."""
    same = [d for d in given if d.chosen_option == entry.get("text")]
    aimed = [d for d in same if d.step_key == CORRECTION_KEY + entry.get("key", "*")]
    found = aimed or same
    return found[-1] if found else None
