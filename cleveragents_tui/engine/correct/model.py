"""What a correction's preview returns (the impact) and the errors a correction raises."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

from cleveragents_tui.domain.correction import CorrectionAttempt
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import (
    CorrectionMode,
    Phase,
    PlanState,
)
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.rollback import RollbackReport
from cleveragents_tui.engine.core.reconcile import (
    OutsideChanges,
)
from cleveragents_tui.engine.correct.append import AppendPlan
from cleveragents_tui.engine.correct.guidance import Alternatives
from cleveragents_tui.engine.correct.later_guidance import LaterGuidance
from cleveragents_tui.engine.correct.later_writers import RemadeDecision

T = TypeVar("T")


def copied(value: T, **changes: Any) -> T:
    """``dataclasses.replace(value, **changes)`` for the frozen dataclasses of a preview
    (:class:`Impact`, engine/correct/snapshot.py's ``Snapshot``: no ``__post_init__``, no
    slots, no init-only fields), without running ``__init__`` again: replace costs 13–26 µs
    for their ~25 fields (each set through ``object.__setattr__``), a tenth of a small
    preview (issue 22); this, a dict's copy."""
    unknown = changes.keys() - _shape(type(value))[0]
    if unknown:
        raise TypeError(f"{type(value).__name__} has no field(s) {sorted(unknown)}")
    made = object.__new__(type(value))
    made.__dict__.update(value.__dict__, **changes)
    return made


def built(kind: type[T], values: dict[str, Any]) -> T:
    """``kind(**values)`` for the same dataclasses as :func:`copied`, as cheaply: the
    fields not given take their defaults (a factory's made anew)."""
    names, required, defaults, factories = _shape(kind)
    if not values.keys() <= names or not required <= values.keys():
        wrong = sorted((values.keys() - names) | (required - values.keys()))
        raise TypeError(f"{kind.__name__}: field(s) {wrong} unknown or missing")
    made = object.__new__(kind)
    made.__dict__.update(defaults)
    for name, factory in factories:
        made.__dict__[name] = factory()
    made.__dict__.update(values)
    return made


# a dataclass's field names, those without a default, the defaults, the default factories
Shape = tuple[frozenset[str], frozenset[str], dict[str, Any], tuple[tuple[str, Any], ...]]
_SHAPES: dict[type[Any], Shape] = {}


def _shape(kind: type[Any]) -> Shape:
    shape = _SHAPES.get(kind)
    if shape is None:
        found = fields(kind)
        shape = _SHAPES[kind] = (
            frozenset(f.name for f in found),
            frozenset(
                f.name for f in found if f.default is MISSING and f.default_factory is MISSING
            ),
            {f.name: f.default for f in found if f.default is not MISSING},
            tuple((f.name, f.default_factory) for f in found if f.default_factory is not MISSING),
        )
    return shape


class Tier(StrEnum):
    FULL = "full decision-level"
    PHASE = "phase-level"
    NONE = "no rollback"


class ChildAction(StrEnum):
    CANCEL = "cancel"
    CANCEL_AND_ROLL_BACK = "cancel and roll back its sandbox"
    REJECT = "reject: already applied"


class CorrectionRefusedError(UserError):
    """The correction cannot be made as asked; nothing was changed."""


class StalePreviewError(UserError):
    """The plan changed after the preview was made."""


@dataclass(frozen=True)
class CorrectionRequest:
    """A correction as asked: of which decision (``plan_ref``: of which plan), how, with what
    guidance; ``choose``: the alternative (1-based) named instead of selected by the
    guidance; ``sandbox_base``: the sandbox folder ``execute`` will use."""

    decision_ref: str
    mode: CorrectionMode
    guidance: str
    plan_ref: str | None = None
    choose: int | None = None
    sandbox_base: Path | None = None


@dataclass(frozen=True)
class ChildImpact:
    plan_id: str
    action: str
    phase: Phase
    state: PlanState
    outcome: ChildAction


@dataclass(frozen=True)
class IrreversibleEffect:
    tool: str
    invocations: int
    side_effects: tuple[str, ...]


_NOTHING: dict[str, Any] = {  # what an Impact found when nothing is given
    "affected_decisions": (),
    "children": (),
    "rollbackable": (),
    "non_rollbackable": (),
    "unaffected": (),
    "irreversible": (),
    "phase_change": None,
}


@dataclass(frozen=True)
class Impact:
    plan_id: str
    plan_version: int
    attempt: int
    decision_id: str
    decision_phase: Phase
    step_key: str | None
    mode: CorrectionMode
    guidance: str
    tier: Tier
    affected_decisions: tuple[str, ...]
    children: tuple[ChildImpact, ...]
    rollbackable: tuple[str, ...]
    non_rollbackable: tuple[str, ...]
    unaffected: tuple[str, ...]
    irreversible: tuple[IrreversibleEffect, ...]
    phase_change: tuple[Phase, Phase] | None
    # current decisions outside the subtree that wrote to a rolled-back resource: re-made
    # (engine/correct/later_writers.py); they and their dependents are in affected_decisions too
    remade: tuple[RemadeDecision, ...] = field(default=())
    warnings: tuple[str, ...] = field(default=())
    # the corrected decision's alternatives and the one the replay takes (engine/correct/guidance.py);
    # None for a decision the scripted reasoner did not make
    alternatives: Alternatives | None = None
    # append mode: the appended plan's decisions, sandboxes and landing (engine/correct/append.py)
    append: AppendPlan | None = None
    # phase-level tier: sandboxes without checkpoints (checkpointing off) the revert discards
    # and makes anew from the real resources (engine/core/rollback.py); listed in rollbackable too
    recreated: tuple[str, ...] = field(default=())
    # files changed outside the plan (engine/core/reconcile.py) in sandboxes the revert rolls
    # back: kept (re-applied on top, before the replay) or discarded, as the user chooses
    outside_changes: tuple[OutsideChanges, ...] = field(default=())
    # guidance earlier corrections gave that the restored actor state lacks
    # (engine/correct/later_guidance.py): carried forward when their correction stands, else dropped
    guidance_carried: tuple[LaterGuidance, ...] = field(default=())
    guidance_dropped: tuple[LaterGuidance, ...] = field(default=())

    @classmethod
    def bare(
        cls,
        plan: Plan,
        decision: Decision,
        mode: CorrectionMode,
        guidance: str,
        tier: Tier,
        **found: Any,
    ) -> Impact:
        """Correcting ``decision`` as if it affected, rolled back and repeated nothing but
        what a preview ``found`` (the other fields, given here: a copy of an Impact costs
        what building one does, a sixth of a small preview's Python, issue 22)."""
        return built(
            cls,
            {
                **_NOTHING,
                "plan_id": plan.plan_id,
                "plan_version": plan.version,
                "attempt": plan.attempt,
                "decision_id": decision.decision_id,
                "decision_phase": decision.phase,
                "step_key": decision.step_key,
                "mode": mode,
                "guidance": guidance,
                "tier": tier,
                **found,
            },
        )

    def rolled_back(self) -> tuple[str, ...]:
        """The resources rolled back, as the preview names them: ``ID (recreated)`` for a
        sandbox made anew."""
        return tuple(f"{r} (recreated)" if r in self.recreated else r for r in self.rollbackable)


@dataclass(frozen=True)
class CorrectionResult:
    correction: CorrectionAttempt
    plan: Plan
    report: RollbackReport | None


class CorrectionIncompleteError(RuntimeError):
    """The resources were rolled back but the correction could not be completed."""
