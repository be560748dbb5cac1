"""Every versioned JSON document the CLI prints (``cleveragents.<kind>/<N>``), one model each.

Builders fill a model and print :meth:`Document.dump`; the fields, in the order printed, are
the document's contract (docs/json-formats.md, checked field by field by
tests/domain/test_documents.py). Nested objects stay plain JSON values: each has its own
model or builder where it is made.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field


class Document(BaseModel):
    """A document: ``format`` first, then the fields in declaration order."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    format: str
    # Fields left out of the printed document while they are None (present only sometimes).
    OMITTED_WHEN_NONE: ClassVar[frozenset[str]] = frozenset()
    # Where the fields are documented besides docs/json-formats.md (a page in docs/).
    DOC_PAGE: ClassVar[str | None] = None
    # Another format whose documentation lists this one's fields (same shape, other name).
    DOCUMENTED_AS: ClassVar[str | None] = None

    def dump(self) -> dict[str, Any]:
        """The document as printed: JSON-ready values, optional fields left out when None."""
        data = self.model_dump(by_alias=True)
        for name in self.OMITTED_WHEN_NONE:
            if data.get(name) is None:
                data.pop(name, None)
        return data


# -- plans -----------------------------------------------------------------------------------


class PlanListDocument(Document):
    format: Literal["cleveragents.plan-list/1"] = "cleveragents.plan-list/1"
    plans: list[Any]


class PlanDocument(Document):
    format: Literal["cleveragents.plan/1"] = "cleveragents.plan/1"
    plan: Any
    root_decision_id: str | None
    decisions_by_type: Any
    checkpoint_count: int
    error: str | None
    model: str | None
    model_base_url: str | None
    usage: Any
    children: list[Any]
    corrections: list[Any]


class PlanTreeDocument(Document):
    format: Literal["cleveragents.plan-tree/1"] = "cleveragents.plan-tree/1"
    plan: Any
    show_superseded: bool
    hidden_superseded: int
    decisions: list[Any]


class SamplePlanDocument(PlanTreeDocument):
    """``agents demo-data``: the loaded plan's tree."""

    format: Literal["cleveragents.sample-plan/1"] = "cleveragents.sample-plan/1"  # type: ignore[assignment]
    DOCUMENTED_AS: ClassVar[str | None] = "cleveragents.plan-tree/1"


class DecisionDocument(Document):
    format: Literal["cleveragents.decision/1"] = "cleveragents.decision/1"
    decision: Any
    plan: Any
    children: list[Any]
    depends_on: list[Any]
    tool_invocations: list[Any]
    checkpoints: list[Any]


class PlanResultDocument(Document):
    format: Literal["cleveragents.plan-result/1"] = "cleveragents.plan-result/1"
    plan: Any
    pending_approvals: list[Any]
    landed: list[str]
    reverted_by: str | None


ApplyVerdict = Literal["lands", "refused", "waits", "reverts", "asks"]  # what `plan apply` would do


class ApplyPreviewDocument(Document):
    """``agents plan apply --dry-run``: engine/read/apply_preview.py's ``ApplyPreview``."""

    format: Literal["cleveragents.apply-preview/1"] = "cleveragents.apply-preview/1"
    plan_id: str
    phase: str
    state: str
    at_apply_gate: bool
    note: str | None
    plans: list[Any]
    command: str
    verdict: ApplyVerdict
    first: str | None
    approved_by: str | None
    outside_changes: list[str]


class DemoDocument(Document):
    format: Literal["cleveragents.demo/1"] = "cleveragents.demo/1"
    plan_id: str
    phase: str
    state: str
    directory: str
    action_file: str
    database_url: str
    app_database: str


# -- corrections -----------------------------------------------------------------------------


class CorrectionDocument(Document):
    format: Literal["cleveragents.correction/1"] = "cleveragents.correction/1"
    correction: Any
    plan: Any


class CorrectionPreviewDocument(Document):
    """The fields of engine's ``Impact``, in its order (a new one fails here, not silently),
    then who the correction would be requested by (``--as NAME``, else the user)."""

    format: Literal["cleveragents.correction-preview/1"] = "cleveragents.correction-preview/1"
    plan_id: str
    plan_version: int
    attempt: int
    decision_id: str
    decision_phase: Any
    step_key: str | None
    mode: Any
    guidance: str
    tier: Any
    affected_decisions: Any
    children: Any
    rollbackable: Any
    non_rollbackable: Any
    unaffected: Any
    irreversible: Any
    phase_change: Any
    remade: Any
    warnings: Any
    alternatives: Any
    append: Any
    recreated: Any
    outside_changes: Any
    guidance_carried: Any
    guidance_dropped: Any
    requested_by: str


class CorrectionDiffDocument(Document):
    format: Literal["cleveragents.correction-diff/1"] = "cleveragents.correction-diff/1"
    correction: Any
    superseded: list[str]
    replacements: list[str]
    note: str | None
    unfinished: str | None
    resources: list[Any]
    at_decision: list[Any] | None


# -- approvals -------------------------------------------------------------------------------


class ApprovalsDocument(Document):
    format: Literal["cleveragents.approvals/1"] = "cleveragents.approvals/1"
    approvals: list[Any]


class ApprovalDocument(Document):
    """``approve``: the answered approval; ``deny`` adds the plan and what to do next."""

    format: Literal["cleveragents.approval/1"] = "cleveragents.approval/1"
    approval: Any
    plan: Any = None
    choices: list[Any] | None = None
    alternatives: list[Any] | None = None
    OMITTED_WHEN_NONE: ClassVar[frozenset[str]] = frozenset({"plan", "choices", "alternatives"})


# -- settings, resources, actions, profiles --------------------------------------------------


class SettingDocument(Document):
    """``config get/set/unset``: scope and value null when unset; ``unset`` adds ``removed``."""

    format: Literal["cleveragents.setting/1"] = "cleveragents.setting/1"
    key: str
    scope: str | None
    value: Any
    removed: bool | None = None
    OMITTED_WHEN_NONE: ClassVar[frozenset[str]] = frozenset({"removed"})


class SettingsDocument(Document):
    format: Literal["cleveragents.settings/1"] = "cleveragents.settings/1"
    settings: list[Any]


class ResourcesDocument(Document):
    format: Literal["cleveragents.resources/1"] = "cleveragents.resources/1"
    resources: list[Any]


class ResourceDocument(Document):
    format: Literal["cleveragents.resource/1"] = "cleveragents.resource/1"
    resource_id: str
    kind: str
    location: str
    sandbox_strategy: str
    checkpoint_enabled: bool
    checkpoint_max_per_plan: int
    created_at: str
    plans: list[Any]
    actions: list[str]


class ActionCheckDocument(Document):
    format: Literal["cleveragents.action-check/1"] = "cleveragents.action-check/1"
    file: str
    action: str | None
    problems: list[Any]


class ActionsDocument(Document):
    format: Literal["cleveragents.actions/1"] = "cleveragents.actions/1"
    actions: list[Any]


class ActionDocument(Document):
    format: Literal["cleveragents.action/1"] = "cleveragents.action/1"
    name: str
    source: str | None
    updated_at: str
    definition: Any


class AutomationProfileDocument(Document):
    """``show``, ``add`` and ``remove``; ``result`` (added/replaced/removed) when changed."""

    format: Literal["cleveragents.automation-profile/1"] = "cleveragents.automation-profile/1"
    profile: Any
    result: str | None = None
    OMITTED_WHEN_NONE: ClassVar[frozenset[str]] = frozenset({"result"})
    DOC_PAGE: ClassVar[str | None] = "automation-profiles.md"


class AutomationProfileListDocument(Document):
    format: Literal["cleveragents.automation-profile-list/1"] = (
        "cleveragents.automation-profile-list/1"
    )
    profiles: list[Any]
    DOC_PAGE: ClassVar[str | None] = "automation-profiles.md"


# -- maintenance -----------------------------------------------------------------------------


class SchemaDocument(Document):
    format: Literal["cleveragents.schema/1"] = "cleveragents.schema/1"
    database: str
    from_: str | None = Field(alias="from")
    to: str | None


class DoctorDocument(Document):
    format: Literal["cleveragents.doctor/1"] = "cleveragents.doctor/1"
    checkpoints_verified: int
    checked: Any
    repaired_groups: list[Any]
    repaired_corrections: list[Any]
    repaired_plans: list[Any]
    finished_applies: list[Any]
    problems: list[Any]
    DOC_PAGE: ClassVar[str | None] = "sandboxes.md"


class DiscardDocument(Document):
    format: Literal["cleveragents.discard/1"] = "cleveragents.discard/1"
    plan_id: str
    discarded: bool
    plans: list[str]
    cancelled: list[Any]
    sandboxes: list[Any]
    branches: list[Any]
    checkpoints: int
    bytes: int


class GcDocument(Document):
    format: Literal["cleveragents.gc/1"] = "cleveragents.gc/1"
    retention_days: Any
    applied: bool
    checkpoints: list[Any]
    bytes_freed: int
    finished_plans_with_sandboxes: list[Any]


DOCUMENTS: tuple[type[Document], ...] = (
    PlanListDocument,
    PlanDocument,
    PlanTreeDocument,
    SamplePlanDocument,
    DecisionDocument,
    PlanResultDocument,
    ApplyPreviewDocument,
    DemoDocument,
    CorrectionDocument,
    CorrectionPreviewDocument,
    CorrectionDiffDocument,
    ApprovalsDocument,
    ApprovalDocument,
    SettingDocument,
    SettingsDocument,
    ResourcesDocument,
    ResourceDocument,
    ActionCheckDocument,
    ActionsDocument,
    ActionDocument,
    AutomationProfileDocument,
    AutomationProfileListDocument,
    SchemaDocument,
    DoctorDocument,
    DiscardDocument,
    GcDocument,
)
