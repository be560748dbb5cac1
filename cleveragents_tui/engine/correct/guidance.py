"""Which alternative a correction's replay takes, told before anything changes
(docs/corrections.md, "Guidance that selects nothing").

The scripted reasoner re-makes a corrected decision by reading the guidance against the
alternatives of the decision's point (actors/reasoners/scripted.py). A preview reads it the
same way, so it can say which alternative the replay will take — or that the guidance
selects none, when the replay would quietly make the point's fallback again. The user then
names one (``agents plan correct --choose N``, or the pick in the app's impact preview); the
alternative named or selected is pinned in the guidance the actor is forked with, so the
replay takes exactly what the preview said.

*The alternatives of a decision are those of its own decision point*, in file order,
numbered from 1. A point gated by ``when:`` on another decision (the demo's
``implement-function`` and ``implement-class``, gated on ``strategy``) does not offer its
sibling's alternatives: which of the two is made is the choice of the decision ``when:``
names, and changing that is a correction of that decision, with its own impact. When the
guidance selects nothing here but selects another alternative of such a decision, the
preview names that decision to correct instead.

A decision the scripted reasoner did not make — its phase's actor is not the scripted one,
or no point of the plan's action has its key and its chosen option (a chat model's: the
model reads the guidance itself) — has no alternatives here, and nothing is refused.

A retry of a failed call (made by the system, whichever actor) has two: retry (the actor
fixes or replaces the call again, with the guidance) and stop and ask a person. The replay
takes the first unless the user names the second; the pick reaches the failure's
handling through the pinned guidance (engine/run/recoveries.py, ``chosen_by_a_person``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from cleveragents_tui.actors.reasoners.scripted import fallback, select
from cleveragents_tui.domain.action import Action, DecisionPoint
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import Phase
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.engine.run.plans import SCRIPTED_ACTOR
from cleveragents_tui.engine.run.recoveries import is_recovery, is_retry


@dataclass(frozen=True)
class Elsewhere:
    """An alternative of a decision named in the point's ``when:`` that the guidance selects."""

    decision_id: str
    key: str
    option: str


@dataclass(frozen=True)
class Alternatives:
    """The corrected decision's point as the scripted reasoner will re-make it."""

    key: str
    options: tuple[str, ...]
    selected: int | None  # 1-based: what the replay takes; None: the guidance selects none
    chosen: bool  # named by the user (--choose, the app's pick), not selected by the guidance
    fallback: int  # 1-based: what the replay would take were nothing selected
    elsewhere: tuple[Elsewhere, ...] = ()
    by_default: bool = False  # selected whatever the guidance says (a retry: retry again)

    @property
    def option(self) -> str | None:
        """The option the replay takes, when one is selected or chosen."""
        return None if self.selected is None else self.options[self.selected - 1]

    def numbered(self) -> str:
        return "; ".join(f"{n}. {option}" for n, option in enumerate(self.options, 1))

    @property
    def how_to_pick(self) -> str:
        """The CLI's way out when the guidance selects none (one alternative: take it)."""
        count = len(self.options)
        return (
            "take it anyway with --choose 1"
            if count == 1
            else f"name one with --choose N (1-{count})"
        )


def alternatives(
    action: Action | None,
    decision: Decision,
    guidance: str,
    current: Mapping[str, tuple[str, str]],
    choose: int | None = None,
) -> Alternatives | None:
    """The alternatives of ``decision``'s point and what ``guidance`` (or ``choose``, 1-based)
    selects among them; None for a decision the scripted reasoner did not make.
    ``current``: step key -> (decision id, chosen option) of the plan's current decisions."""
    if is_retry(decision):
        return _retry_alternatives(decision, choose)
    point = _scripted_point(action, decision)
    if point is None:
        if choose is not None and is_recovery(decision):
            raise UserError(
                f"decision {decision.decision_id} stopped to ask a person about a failed "
                "call: there are no alternatives to choose from",
                "answer its question (agents approval list), or correct the decision whose "
                "call failed",
            )
        if choose is not None:
            raise UserError(
                f"decision {decision.decision_id} was not made by the scripted reasoner, so "
                "there are no numbered alternatives to choose from",
                "leave out --choose: the model that made it reads the guidance itself",
            )
        return None
    options = tuple(a.option for a in point.alternatives)
    selected = select(point, guidance)
    found = Alternatives(
        key=point.key,
        options=options,
        selected=None if selected is None else options.index(selected.option) + 1,
        chosen=False,
        fallback=options.index(fallback(point).option) + 1,
        elsewhere=() if selected is not None else _elsewhere(action, point, guidance, current),
    )
    return found if choose is None else with_choice(found, choose)


def with_choice(found: Alternatives, number: int) -> Alternatives:
    """``found`` with alternative ``number`` (1-based) named by the user."""
    if not 1 <= number <= len(found.options):
        raise UserError(
            f"there is no alternative {number}: step {found.key} has "
            f"{len(found.options)} ({found.numbered()})",
            f"choose a number from 1 to {len(found.options)}",
        )
    return replace(found, selected=number, chosen=True, elsewhere=(), by_default=False)


def refusal(decision_id: str, guidance: str, found: Alternatives) -> UserError:
    """Why a correction whose guidance selects nothing is not carried out, in one line."""
    fix = found.how_to_pick + "".join(
        f", or correct decision {e.decision_id} ({e.key}) instead: the guidance selects its "
        f"alternative {e.option!r}"
        for e in found.elsewhere
    )
    return UserError(
        f"the guidance {guidance!r} for decision {decision_id} selects none of the "
        f"alternatives of step {found.key} ({found.numbered()}): the replay would make the "
        "same choice again",
        fix,
    )


def _retry_alternatives(decision: Decision, choose: int | None) -> Alternatives:
    """A retry's options as it recorded them (retry, stop and ask); retry unless named."""
    found = Alternatives(
        key=decision.step_key or decision.decision_id,
        options=tuple(decision.alternatives_considered),
        selected=1,
        chosen=False,
        fallback=1,
        by_default=True,
    )
    return found if choose is None else with_choice(found, choose)


def _scripted_point(action: Action | None, decision: Decision) -> DecisionPoint | None:
    if action is None or decision.step_key is None:
        return None
    actor = (
        action.actors.strategy if decision.phase is Phase.STRATEGIZE else action.actors.execution
    )
    if actor != SCRIPTED_ACTOR:
        return None
    point = next((p for p in action.decisions if p.key == decision.step_key), None)
    if point is None or decision.chosen_option not in {a.option for a in point.alternatives}:
        return None
    return point


def _elsewhere(
    action: Action | None,
    point: DecisionPoint,
    guidance: str,
    current: Mapping[str, tuple[str, str]],
) -> tuple[Elsewhere, ...]:
    """Decisions named in the point's ``when:`` whose other alternatives the guidance selects."""
    if action is None:
        return ()
    found: list[Elsewhere] = []
    for key in point.when:
        gate = next((p for p in action.decisions if p.key == key), None)
        made = current.get(key)
        if gate is None or made is None:
            continue
        selected = select(gate, guidance)
        if selected is not None and selected.option != made[1]:
            found.append(Elsewhere(made[0], key, selected.option))
    return tuple(found)
