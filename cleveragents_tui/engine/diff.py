"""Comparing attempts: what a correction changed, in decisions and in every resource.

The old attempt is the state each resource was in when the correction started (its safety
checkpoint, kept by the rollback); the new attempt is the resource's latest live checkpoint
of the plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cleveragents_tui.domain.correction import CorrectionAttempt
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.ids import parse_ulid
from cleveragents_tui.domain.views import TreeRow
from cleveragents_tui.engine.sandboxes import PlanSandboxes
from cleveragents_tui.sandbox.base import Change
from cleveragents_tui.store.store import Store


@dataclass(frozen=True)
class FileDiff:
    change: Change
    old: bytes | None
    new: bytes | None


@dataclass(frozen=True)
class ResourceDiff:
    resource_id: str
    old_ref: str
    new_ref: str
    files: list[FileDiff] = field(default_factory=list)
    note: str | None = None


@dataclass(frozen=True)
class CorrectionDiff:
    correction: CorrectionAttempt
    superseded: list[TreeRow]
    replacements: list[TreeRow]
    resources: list[ResourceDiff]


def correction_diff(store: Store, correction_ref: str) -> CorrectionDiff:
    correction_id = parse_ulid(correction_ref, "correction")
    with store.unit_of_work() as uow:
        correction = uow.corrections.get(correction_id)
        rows = uow.decisions.tree_rows(correction.plan_id, include_superseded=True)
        checkpoints = uow.checkpoints.for_plan(correction.plan_id)
    replacement = correction.replacement_decision_id
    superseded = [r for r in rows if replacement is not None and r.superseded_by == replacement]
    replacements = [
        r
        for r in rows
        if r.corrects_decision_id == correction.target_decision_id and r.superseded_by is None
    ]
    resources: list[ResourceDiff] = []
    sandboxes = PlanSandboxes(store, correction.plan_id)
    for entry in correction.report.get("resources", []):
        if not isinstance(entry, dict) or not entry.get("safety_ref"):
            continue
        resource_id = str(entry["resource_id"])
        live = [c for c in checkpoints if c.resource_id == resource_id and c.rollbackable]
        old_ref = str(entry["safety_ref"])
        if not live:
            resources.append(
                ResourceDiff(resource_id, old_ref, "", note="no checkpoint of the new attempt yet")
            )
            continue
        new_ref = live[-1].ref
        try:
            sandbox = sandboxes.get(resource_id)
            files = [
                FileDiff(c, sandbox.read(old_ref, c.path), sandbox.read(new_ref, c.path))
                for c in sandbox.diff(old_ref, new_ref)
            ]
            resources.append(ResourceDiff(resource_id, old_ref, new_ref, files))
        except UserError as exc:
            resources.append(ResourceDiff(resource_id, old_ref, new_ref, note=str(exc)))
    return CorrectionDiff(correction, superseded, replacements, resources)
