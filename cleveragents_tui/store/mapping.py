"""Rows to domain models and back.

Reading is where stored data meets validation: anything malformed (invalid JSON, an unknown
enum value, a rule the model enforces) becomes one :class:`StoreCorruptedError` that names
the table, the row and the column, instead of a traceback from deep inside a parser.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from cleveragents_tui.domain.approval import Approval
from cleveragents_tui.domain.checkpoint import CheckpointGroup, CheckpointMetadata
from cleveragents_tui.domain.correction import CorrectionAttempt
from cleveragents_tui.domain.decision import ArtifactRef, Decision
from cleveragents_tui.domain.enums import DependencyType
from cleveragents_tui.domain.errors import StoreCorruptedError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.domain.tool import ToolInvocation
from cleveragents_tui.store.tables import (
    ApprovalRow,
    CheckpointGroupRow,
    CheckpointMetadataRow,
    CorrectionAttemptRow,
    DecisionRow,
    PlanRow,
    ResourceRow,
    ToolInvocationRow,
)

M = TypeVar("M")
P = TypeVar("P", bound=BaseModel)
_FIX = "the row was changed outside cleveragents; run `agents doctor` and restore it from a backup"


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def dump_json(value: Any) -> str:
    """``json.dumps`` with these options, on one encoder (json.dumps makes one per call
    when given options: a third of a small value's time; three per recorded decision)."""
    return _ENCODER.encode(value)


def _fields(model: BaseModel) -> dict[str, Any]:
    """A flat model's ``model_dump()`` (every field a plain value), read off its fields
    (model_dump's serializer cost ~3 µs a call, per recorded decision)."""
    return {name: getattr(model, name) for name in type(model).model_fields}


def load_json(table: str, key: str, column: str, raw: str | None) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, TypeError) as exc:
        raise StoreCorruptedError(
            f"{table} row {key}: column {column} holds invalid JSON ({exc})", _FIX
        ) from exc


def validated(table: str, key: str, build: Callable[[], M], column: str | None = None) -> M:
    """``build()``, its validation error one :class:`StoreCorruptedError` naming the table, the
    row and the field (a field of the JSON in ``column``, when given)."""
    try:
        return build()
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or column or "row"
        if column is not None:
            where = f"{column}.{where}"
        raise StoreCorruptedError(
            f"{table} row {key}: {where} is invalid ({first['msg']})", _FIX
        ) from exc


def _from_columns(model: type[P], table: str, key: str, row: object, **loaded: Any) -> P:
    """``model`` from the row's columns of the same names (``loaded`` replacing some)."""
    fields = {c: getattr(row, c) for c in model.model_fields}
    fields.update(loaded)
    return validated(table, key, lambda: model.model_validate(fields))


# Plans ---------------------------------------------------------------------------------


def plan_to_row(plan: Plan) -> PlanRow:
    return PlanRow(**plan.model_dump(mode="python"))


def plan_from_row(row: PlanRow) -> Plan:
    return _from_columns(Plan, "plans", row.plan_id, row)


# Decisions -----------------------------------------------------------------------------


DecisionValues = tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]


def _json_list(values: Sequence[Any]) -> str:
    return dump_json(list(values)) if values else "[]"


def decision_values(decision: Decision) -> DecisionValues:
    """The column values of a decision's row, its dependency rows and its artifact rows, as
    plain dicts: what a Core insert takes (``record_decision``: building ORM rows to read
    their values back cost ten times as much)."""
    snapshot = decision.context_snapshot
    row = {
        "decision_id": decision.decision_id,
        "plan_id": decision.plan_id,
        "parent_decision_id": decision.parent_decision_id,
        "sequence_number": decision.sequence_number,
        "decision_type": decision.decision_type.value,
        "phase": decision.phase.value,
        "question": decision.question,
        "chosen_option": decision.chosen_option,
        "alternatives_considered": _json_list(decision.alternatives_considered),
        "confidence_score": decision.confidence_score,
        "hot_context_hash": snapshot.hot_context_hash,
        "hot_context_ref": snapshot.hot_context_ref,
        "relevant_resources": _json_list([_fields(r) for r in snapshot.relevant_resources]),
        "actor_state_ref": (
            None
            if snapshot.actor_state_ref is None
            else dump_json(_fields(snapshot.actor_state_ref))
        ),
        "rationale": decision.rationale,
        "actor_reasoning": decision.actor_reasoning,
        "created_at": decision.created_at,
        "is_correction": decision.is_correction,
        "corrects_decision_id": decision.corrects_decision_id,
        "correction_reason": decision.correction_reason,
        "superseded_by": decision.superseded_by,
        "step_key": decision.step_key,
    }
    deps = [
        {
            "upstream_decision_id": decision.decision_id,
            "downstream_ref": ref,
            "dependency_type": kind.value,
        }
        for kind, refs in (
            (DependencyType.DECISION, decision.downstream_decision_ids),
            (DependencyType.PLAN, decision.downstream_plan_ids),
        )
        for ref in refs
    ]
    artifacts = [
        {
            "decision_id": decision.decision_id,
            "artifact_path": a.artifact_path,
            "artifact_type": a.artifact_type,
        }
        for a in decision.artifacts_produced
    ]
    return row, deps, artifacts


def decisions_from_rows(
    rows: Sequence[DecisionRow],
    dependencies: Iterable[tuple[str, str, str]],
    artifacts: Iterable[tuple[str, str, str]],
    make: Callable[[Any, tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]], Decision]
    | None = None,
) -> list[Decision]:
    """``rows`` as decisions, in their order, given the (upstream decision, downstream_ref,
    dependency_type) and (decision, artifact_path, artifact_type) rows read for them, each
    in insertion order; ``make`` builds one (default :func:`decision_from_row`)."""
    deps: dict[str, list[tuple[str, str]]] = {r.decision_id: [] for r in rows}
    produced: dict[str, list[tuple[str, str]]] = {r.decision_id: [] for r in rows}
    for upstream, ref, kind in dependencies:
        deps[upstream].append((ref, kind))
    for decision_id, path, kind in artifacts:
        produced[decision_id].append((path, kind))
    build = make or decision_from_row
    return [build(r, tuple(deps[r.decision_id]), tuple(produced[r.decision_id])) for r in rows]


def decision_from_row(
    row: DecisionRow,
    dependencies: Iterable[tuple[str, str]] = (),
    artifacts: Iterable[tuple[str, str]] = (),
) -> Decision:
    """``dependencies`` are (downstream_ref, dependency_type) and ``artifacts`` are
    (artifact_path, artifact_type), both in insertion order."""
    key = row.decision_id

    def load(column: str) -> Any:
        return load_json("decisions", key, column, getattr(row, column))

    deps = list(dependencies)
    fields = {
        "decision_id": row.decision_id,
        "plan_id": row.plan_id,
        "parent_decision_id": row.parent_decision_id,
        "sequence_number": row.sequence_number,
        "decision_type": row.decision_type,
        "phase": row.phase,
        "question": row.question,
        "chosen_option": row.chosen_option,
        "alternatives_considered": load("alternatives_considered"),
        "confidence_score": row.confidence_score,
        "context_snapshot": {
            "hot_context_hash": row.hot_context_hash,
            "hot_context_ref": row.hot_context_ref,
            "relevant_resources": load("relevant_resources"),
            "actor_state_ref": load("actor_state_ref"),
        },
        "rationale": row.rationale,
        "actor_reasoning": row.actor_reasoning,
        "downstream_decision_ids": [ref for ref, kind in deps if kind == DependencyType.DECISION],
        "downstream_plan_ids": [ref for ref, kind in deps if kind == DependencyType.PLAN],
        "artifacts_produced": [
            ArtifactRef(artifact_path=path, artifact_type=kind) for path, kind in artifacts
        ],
        "created_at": row.created_at,
        "is_correction": row.is_correction,
        "corrects_decision_id": row.corrects_decision_id,
        "correction_reason": row.correction_reason,
        "superseded_by": row.superseded_by,
        "step_key": row.step_key,
    }
    return validated("decisions", key, lambda: Decision.model_validate(fields))


# Resources, checkpoints, tool invocations, corrections ---------------------------------


def resource_to_row(resource: Resource) -> ResourceRow:
    return ResourceRow(**resource.model_dump(mode="python"))


def resource_from_row(row: ResourceRow) -> Resource:
    return _from_columns(Resource, "resources", row.resource_id, row)


def group_from_row(row: CheckpointGroupRow) -> CheckpointGroup:
    return _from_columns(CheckpointGroup, "checkpoint_groups", row.group_id, row)


def checkpoint_to_row(checkpoint: CheckpointMetadata) -> CheckpointMetadataRow:
    return CheckpointMetadataRow(**checkpoint.model_dump(mode="python"))


def checkpoint_from_row(row: CheckpointMetadataRow) -> CheckpointMetadata:
    return _from_columns(CheckpointMetadata, "checkpoint_metadata", row.checkpoint_id, row)


def invocation_to_row(invocation: ToolInvocation) -> ToolInvocationRow:
    data = invocation.model_dump(mode="python")
    data["arguments"] = dump_json(data["arguments"])
    data["side_effects"] = dump_json(list(data["side_effects"]))
    return ToolInvocationRow(**data)


def invocation_from_row(row: ToolInvocationRow) -> ToolInvocation:
    key = row.invocation_id
    return _from_columns(
        ToolInvocation,
        "tool_invocations",
        key,
        row,
        arguments=load_json("tool_invocations", key, "arguments", row.arguments),
        side_effects=load_json("tool_invocations", key, "side_effects", row.side_effects),
    )


def correction_from_row(row: CorrectionAttemptRow) -> CorrectionAttempt:
    key = row.correction_id
    report = load_json("correction_attempts", key, "report", row.report)
    return _from_columns(CorrectionAttempt, "correction_attempts", key, row, report=report)


def approval_to_row(approval: Approval) -> ApprovalRow:
    data = approval.model_dump(mode="python")
    data["details"] = dump_json(approval.model_dump(mode="json")["details"])
    return ApprovalRow(**data)


def approval_from_row(row: ApprovalRow) -> Approval:
    details = load_json("approvals", row.approval_id, "details", row.details)
    return _from_columns(Approval, "approvals", row.approval_id, row, details=details)
