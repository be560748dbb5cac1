"""Load the bundled sample plan (``assets/demo/sample-plan.yaml``) into a store.

The sample is a recorded plan with a correction, a superseded branch, influence edges, tool
invocations with irreversible effects, and a child plan. Each load creates a new plan with
fresh ids, so it never collides with what is already stored.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml

from cleveragents_tui.domain.correction import CorrectionAttempt
from cleveragents_tui.domain.decision import ArtifactRef, ContextSnapshot, Decision, ResourceRef
from cleveragents_tui.domain.dependency import DecisionDependency
from cleveragents_tui.domain.enums import DependencyType
from cleveragents_tui.domain.ids import new_ulid
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.domain.tool import ToolInvocation
from cleveragents_tui.resources import data_path
from cleveragents_tui.store.store import Store
from cleveragents_tui.store.unit_of_work import UnitOfWork

SAMPLE_PLAN = ("assets", "demo", "sample-plan.yaml")


def load_sample_plan(store: Store, path: Path | None = None) -> str:
    """Store the sample plan and its child plans; returns the top-level plan id."""
    spec: dict[str, Any] = yaml.safe_load((path or data_path(*SAMPLE_PLAN)).read_text("utf-8"))
    with store.unit_of_work(write=True) as uow:
        loader = _Loader(uow, start=utc_now() - timedelta(hours=1))
        plan_id = loader.load(spec)
        uow.events.append(
            "demo_data_loaded", {"plan_id": plan_id}, plan_id=plan_id, actor="agents demo-data"
        )
        uow.commit()
    return plan_id


class _Loader:
    def __init__(self, uow: UnitOfWork, start: Any) -> None:
        self._uow = uow
        self._clock = start

    def _tick(self) -> Any:
        self._clock += timedelta(seconds=37)
        return self._clock

    def load(
        self, spec: dict[str, Any], parent_plan: str | None = None, spawned_by: str | None = None
    ) -> str:
        created = self._tick()
        plan = Plan(
            **spec["plan"],
            parent_plan_id=parent_plan,
            spawning_decision_id=spawned_by,
            created_at=created,
            updated_at=created,
        )
        self._uow.plans.add(plan)
        self._uow.flush()
        ids = self._decisions(plan, spec["decisions"])
        for child in spec.get("children", []):
            spawner = ids[child["spawned_by"]]
            child_spec = {
                "plan": {
                    "action": child["action"],
                    "title": child.get("title"),
                    "project": plan.project,
                    "phase": child["phase"],
                    "state": child["state"],
                    "automation_profile": plan.automation_profile,
                },
                "decisions": child["decisions"],
            }
            child_id = self.load(child_spec, plan.plan_id, spawner)
            self._uow.decisions.add_dependency(
                DecisionDependency(
                    upstream_decision_id=spawner,
                    downstream_ref=child_id,
                    dependency_type=DependencyType.PLAN,
                )
            )
        for group in spec.get("supersede", []):
            self._uow.decisions.supersede([ids[k] for k in group["decisions"]], by=ids[group["by"]])
        for call in spec.get("tool_invocations", []):
            self._uow.tool_invocations.add(
                ToolInvocation(
                    plan_id=plan.plan_id,
                    decision_id=ids[call["decision"]],
                    tool=call["tool"],
                    arguments=call.get("arguments", {}),
                    side_effects=call.get("side_effects", ()),
                    irreversible=call.get("irreversible", False),
                    created_at=self._tick(),
                )
            )
        for c in spec.get("corrections", []):
            self._uow.corrections.add(
                CorrectionAttempt(
                    plan_id=plan.plan_id,
                    target_decision_id=ids[c["target"]],
                    mode=c["mode"],
                    guidance=c["guidance"],
                    status=c["status"],
                    attempt=c["attempt"],
                    replacement_decision_id=ids[c["replacement"]],
                    requested_by=c.get("requested_by"),
                    created_at=self._tick(),
                    finished_at=self._tick(),
                )
            )
        self._uow.flush()
        return plan.plan_id

    def _decisions(self, plan: Plan, entries: list[dict[str, Any]]) -> dict[str, str]:
        ids = {e["key"]: new_ulid() for e in entries}
        dependents: dict[str, list[str]] = {}
        for e in entries:
            for upstream in e.get("depends_on", []):
                dependents.setdefault(upstream, []).append(ids[e["key"]])
        for sequence, e in enumerate(entries):
            decision = Decision(
                decision_id=ids[e["key"]],
                plan_id=plan.plan_id,
                parent_decision_id=ids[e["parent"]] if "parent" in e else None,
                sequence_number=sequence,
                decision_type=e["type"],
                phase=e.get("phase"),
                question=e["question"],
                chosen_option=e["chosen"],
                alternatives_considered=e.get("alternatives", ()),
                confidence_score=e.get("confidence"),
                context_snapshot=ContextSnapshot(
                    relevant_resources=tuple(
                        ResourceRef(**r) for r in e.get("relevant_resources", ())
                    )
                ),
                rationale=e.get("rationale"),
                actor_reasoning=e.get("actor_reasoning"),
                downstream_decision_ids=tuple(dependents.get(e["key"], ())),
                artifacts_produced=tuple(
                    ArtifactRef(artifact_path=a["path"], artifact_type=a["type"])
                    for a in e.get("artifacts", ())
                ),
                created_at=self._tick(),
                is_correction=e.get("is_correction", False),
                corrects_decision_id=ids[e["corrects"]] if "corrects" in e else None,
                correction_reason=e.get("correction_reason"),
            )
            self._uow.decisions.add(decision)
            self._uow.flush()
        return ids
