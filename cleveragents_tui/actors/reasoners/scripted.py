"""The scripted reasoner: deterministic decisions read from an action file.

It is the embedded default, so every real part (git, files, SQL, LangGraph checkpoints) runs
without a model. The next decision of a phase is the first decision point of that phase, in
file order, that

* has no current decision yet (points already decided and not superseded are skipped, so a
  replay after a correction re-makes only what the correction superseded), and
* whose ``when`` conditions hold for the current decisions, and whose ``parent`` (if any)
  has a current decision — a point under one its ``when`` skipped is skipped too.

Choosing an alternative (docs/actions.md, "How guidance selects an alternative"): without
guidance for the point, its ``choose`` option (default: the first). With guidance — the
newest guidance aimed at this point's key, else the newest aimed at ``*`` — an alternative
the user named (the guidance entry's ``choose``, set by ``agents plan correct --choose`` or
the app's pick) is taken as is. Otherwise each alternative scores one per distinct word of
its ``match`` list and of its option text (words of three letters or more) found in the
guidance, case-insensitively, counting only words that not every alternative has (a word
all of them share tells them apart no more than no word; a point with one alternative is
never selected by guidance); the highest score wins, ties go to the earlier alternative. A
score of zero everywhere means the guidance selects none: the point's ``fallback``
(default: ``choose``) is taken and the guidance is still recorded. A correction's preview
says so first (engine/correct/guidance.py), and ``agents plan correct`` refuses it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from cleveragents_tui.actors.base import ActorState, FailedCall, Fix, Proposal, ToolCallRequest
from cleveragents_tui.domain.action import Action, Alternative, DecisionPoint
from cleveragents_tui.domain.enums import Phase

_WORD = re.compile(r"[a-z0-9][a-z0-9_-]{2,}")

CurrentSteps = Callable[[], Mapping[str, str]]
"""Returns step key -> chosen option of the plan's current decisions (read from the store)."""


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def guidance_for(key: str, state: ActorState) -> dict[str, str] | None:
    """The guidance entry that applies to the point: the newest aimed at its key, else the
    newest aimed at the whole plan (``*``)."""
    aimed = [g for g in state["guidance"] if g.get("key") == key]
    if aimed:
        return aimed[-1]
    general = [g for g in state["guidance"] if g.get("key") == "*"]
    return general[-1] if general else None


def _vocabulary(alternative: Alternative) -> set[str]:
    vocabulary = words(alternative.option)
    for phrase in alternative.match:
        vocabulary |= words(phrase)
    return vocabulary


def select(point: DecisionPoint, guidance: str) -> Alternative | None:
    """The alternative the guidance selects, or None when it selects none."""
    vocabularies = [_vocabulary(a) for a in point.alternatives]
    shared = set.intersection(*vocabularies)  # words every alternative has tell none apart
    said = words(guidance) - shared
    best: Alternative | None = None
    best_score = 0
    for alternative, vocabulary in zip(point.alternatives, vocabularies, strict=True):
        score = len(vocabulary & said)
        if score > best_score:
            best, best_score = alternative, score
    return best


def fallback(point: DecisionPoint) -> Alternative:
    """What the point takes when guidance selects none of its alternatives."""
    option = point.fallback or point.choose or point.alternatives[0].option
    return next(a for a in point.alternatives if a.option == option)


def choose(point: DecisionPoint, entry: Mapping[str, str] | None) -> tuple[Alternative, bool]:
    """The alternative to take, and whether the guidance (or the user's pick) selected it."""
    if entry is None:
        return point.default, False
    named = entry.get("choose")
    picked = next((a for a in point.alternatives if a.option == named), None)
    if picked is not None:
        return picked, True
    selected = select(point, entry["text"])
    if selected is not None:
        return selected, True
    return fallback(point), False


def _reasoning(
    entry: Mapping[str, str] | None, alternative: Alternative, guided: bool
) -> str | None:
    if entry is None or not guided:
        return None
    if entry.get("choose") == alternative.option:
        return f"The alternative the user chose, with the guidance: {entry['text']}"
    return f"Following the guidance: {entry['text']}"


class ScriptedReasoner:
    def __init__(self, action: Action, current_steps: CurrentSteps) -> None:
        self._action = action
        self._current_steps = current_steps

    def propose(self, state: ActorState, phase: Phase) -> Proposal | None:
        current = self._current_steps()
        for point in self._action.decisions:
            if point.type.phase is not phase or point.key in current:
                continue
            if any(current.get(key) != option for key, option in point.when.items()):
                continue
            if point.parent is not None and point.parent not in current:
                continue  # its parent was not made (its `when` does not hold): nor is it
            entry = guidance_for(point.key, state)
            guidance = entry["text"] if entry else None
            alternative, guided = choose(point, entry)
            return Proposal(
                key=point.key,
                decision_type=point.type,
                question=point.question,
                chosen_option=alternative.option,
                alternatives=tuple(a.option for a in point.alternatives if a is not alternative),
                confidence=alternative.confidence,
                rationale=alternative.rationale,
                reasoning=_reasoning(entry, alternative, guided),
                parent_key=point.parent,
                # a point that exists only for an earlier choice (`when`) is influenced by
                # it: correcting that choice re-decides whether the point exists at all
                depends_on=tuple(dict.fromkeys((*point.depends_on, *point.when))),
                tool_calls=tuple(
                    ToolCallRequest(c.tool, dict(c.arguments)) for c in alternative.tool_calls
                ),
                spawn=alternative.spawn,
                revise_strategy=alternative.revise_strategy,
                guidance_used=guidance,
            )
        return None

    def propose_fix(self, state: ActorState, failed: FailedCall) -> Fix | None:
        """The ``fix`` of the alternative the failed decision took, for a failed validation;
        None without one, and for any other call (it runs again as it is)."""
        if not failed.validation:
            return None
        chosen = self._current_steps().get(failed.step_key)
        point = next((p for p in self._action.decisions if p.key == failed.step_key), None)
        if point is None or chosen is None:
            return None
        alternative = next((a for a in point.alternatives if a.option == chosen), None)
        if alternative is None or not alternative.fix:
            return None
        calls = tuple(ToolCallRequest(c.tool, dict(c.arguments)) for c in alternative.fix)
        return Fix(calls, f"the fix the action gives for {point.key}")
