"""record_decision: the one way actors record a decision (DESIGN.md section 5).

It captures the context snapshot — the SHA-256 of the full context and a stored copy of it
(``context:<hash>``), the resources the decision's tool calls name, and the LangGraph
checkpoint the decision was made from — records the influence edges the actor declared, and
during Execute stores the decision only together with its committed checkpoint group.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cleveragents_tui import failpoints
from cleveragents_tui.actors.base import Proposal
from cleveragents_tui.domain.decision import ActorStateRef, Decision
from cleveragents_tui.domain.enums import DependencyType, Phase
from cleveragents_tui.engine.core.checkpoints import store_execute_decision
from cleveragents_tui.engine.core.influence import OPEN_GRAPHS
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes
from cleveragents_tui.store.mapping import dump_json
from cleveragents_tui.store.recording import Recording
from cleveragents_tui.store.store import Store


@dataclass(frozen=True)
class Correction:
    """Set on decisions a correction's replay makes, whichever run makes them (the
    correction's own, or one that goes on with its replay: engine/core/replay_snapshots.py,
    ``current_replay``); each is recorded with a ``decision_remade`` event. ``before_apply``:
    called when the replay reaches an Apply that needs nobody's approval, before anything
    lands (the correction records its diff there: docs/corrections.md, "Diffs")."""

    corrects_decision_id: str
    reason: str | None
    before_apply: Callable[[], None] | None = field(default=None, compare=False)


def context_digest(context: Mapping[str, Any]) -> tuple[str, str]:
    """The context's SHA-256 and its canonical JSON (the store's ``dump_json``)."""
    body = dump_json(context)
    return hashlib.sha256(body.encode("utf-8")).hexdigest(), body


def record_decision(
    store: Store,
    sandboxes: PlanSandboxes | None,
    *,
    plan_id: str,
    phase: Phase,
    proposal: Proposal,
    parent_id: str,
    depends_on: Sequence[str],
    actor_ref: ActorStateRef | None,
    context: Mapping[str, Any],
    correction: Correction | None = None,
) -> Decision:
    digest, body = context_digest(context)
    resources = dict.fromkeys(
        str(call.arguments["resource"])
        for call in proposal.tool_calls
        if "resource" in call.arguments
    )
    with store.recordings() as transaction:  # one connection for the whole recording
        modified: set[str] | None = None
        with transaction(False) as rec:  # the number, the parent's plan, what the group checkpoints
            execute = sandboxes if phase is Phase.EXECUTE else None
            sequence, parent_plan = rec.next_sequence_number(
                plan_id, parent_id, None if execute is None else execute.seen_event
            )
            if execute is not None:
                modified = execute.modified(rec)
        decision = Decision.model_validate(  # one validation, the snapshot's within it
            {
                "plan_id": plan_id,
                "parent_decision_id": parent_id,
                "sequence_number": sequence,
                "decision_type": proposal.decision_type,
                "phase": phase,
                "question": proposal.question,
                "chosen_option": proposal.chosen_option,
                "alternatives_considered": proposal.alternatives,
                "confidence_score": proposal.confidence,
                "context_snapshot": {
                    "hot_context_hash": digest,
                    "hot_context_ref": f"context:{digest}",
                    "relevant_resources": [{"resource_id": r} for r in resources],
                    "actor_state_ref": actor_ref,
                },
                "rationale": proposal.rationale,
                "actor_reasoning": proposal.reasoning,
                "is_correction": correction is not None,
                "corrects_decision_id": correction.corrects_decision_id if correction else None,
                "correction_reason": correction.reason if correction else None,
                "step_key": proposal.key,
            }
        )

        def alongside(rec: Recording) -> None:
            rec.put_context(digest, body)
            if correction is not None:  # a replay: each decision made again shows, with it
                payload: dict[str, object] = {"key": proposal.key, "chosen": proposal.chosen_option}
                rec.append_event("decision_remade", payload, plan_id=plan_id)
            rec.add_edges(
                decision.decision_id, list(dict.fromkeys(depends_on)), DependencyType.DECISION.value
            )

        failpoints.hit("record.decision", phase.value)
        if phase is Phase.EXECUTE:
            if sandboxes is None:
                raise ValueError("an Execute decision needs the plan's sandboxes")
            store_execute_decision(
                sandboxes,
                decision,
                also=alongside,
                modified=modified,
                transaction=transaction,
                parent_plan=parent_plan,
            )
        else:
            with transaction(True) as rec:
                rec.store_decision(decision, parent_plan=parent_plan)
                alongside(rec)
                rec.commit()
        failpoints.hit("record.recorded", phase.value)
        OPEN_GRAPHS.recorded(decision, depends_on)
        return decision
