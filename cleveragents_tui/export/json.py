"""The stable JSON formats of ``--format=json`` (documented in docs/json-formats.md).

Each document is a model of domain/documents.py (``format: cleveragents.<kind>/<version>``);
fields are only ever added within a version, never renamed or removed.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from cleveragents_tui.domain.correction import CorrectionAttempt
from cleveragents_tui.domain.documents import (
    DecisionDocument,
    PlanDocument,
    PlanListDocument,
    PlanTreeDocument,
)
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.views import (
    DecisionExplanation,
    PlanDetails,
    PlanSummary,
    PlanTree,
    TreeRow,
)


def plan_json(plan: Plan) -> dict[str, Any]:
    return plan.model_dump(mode="json")


def summary_json(summary: PlanSummary) -> dict[str, Any]:
    return {
        **plan_json(summary.plan),
        "decision_count": summary.decision_count,
        "current_decision_count": summary.current_decision_count,
        "pending_approvals": summary.pending_approvals,
        "depth": summary.depth,
    }


def plan_list_document(summaries: list[PlanSummary]) -> dict[str, Any]:
    return PlanListDocument(plans=[summary_json(s) for s in summaries]).dump()


def plan_document(details: PlanDetails) -> dict[str, Any]:
    return PlanDocument(
        plan=summary_json(details.summary),
        root_decision_id=details.root_decision_id,
        decisions_by_type=dict(sorted(details.decisions_by_type.items())),
        checkpoint_count=details.checkpoint_count,
        error=details.error,
        model=details.model,
        model_base_url=details.model_base_url,
        usage=asdict(details.usage),
        children=[plan_json(c) for c in details.children],
        corrections=[correction_json(c) for c in details.corrections],
    ).dump()


def correction_json(correction: CorrectionAttempt) -> dict[str, Any]:
    """A correction attempt; its report without the snapshots its diff compares (file
    contents: `agents plan diff` shows them)."""
    data = correction.model_dump(mode="json")
    data["report"] = {k: v for k, v in correction.report.items() if k != "snapshots"}
    return data


def tree_row_json(row: TreeRow) -> dict[str, Any]:
    return {
        "decision_id": row.decision_id,
        "parent_decision_id": row.parent_decision_id,
        "sequence_number": row.sequence_number,
        "decision_type": row.decision_type,
        "phase": row.phase,
        "chosen_option": row.chosen_option,
        "confidence_score": row.confidence_score,
        "is_correction": row.is_correction,
        "corrects_decision_id": row.corrects_decision_id,
        "superseded_by": row.superseded_by,
    }


def plan_tree_document(
    tree: PlanTree, document: type[PlanTreeDocument] = PlanTreeDocument
) -> dict[str, Any]:
    """``cleveragents.plan-tree/1`` (or, ``document``, a document of the same shape)."""
    return document(
        plan=plan_json(tree.plan),
        show_superseded=tree.show_superseded,
        hidden_superseded=tree.hidden_superseded,
        decisions=[
            {
                **tree_row_json(line.row),
                "depth": line.depth,
                "has_checkpoint": line.row.decision_id in tree.has_checkpoints,
            }
            for line in tree.lines
        ],
    ).dump()


def decision_document(explanation: DecisionExplanation) -> dict[str, Any]:
    return DecisionDocument(
        decision=explanation.decision.model_dump(mode="json"),
        plan=plan_json(explanation.plan),
        children=[tree_row_json(c) for c in explanation.children],
        depends_on=explanation.depends_on,
        tool_invocations=[t.model_dump(mode="json") for t in explanation.tool_invocations],
        checkpoints=[c.model_dump(mode="json") for c in explanation.checkpoints],
    ).dump()
