"""The schema as a typed SQLAlchemy 2.0 ORM (DESIGN.md section 4).

Alembic owns the schema (``migrations/``); a test checks that a migrated database matches
these declarations exactly. JSON values are stored as text and parsed by ``mapping.py``,
which can then name the row and column of anything malformed.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from cleveragents_tui.store.types import UtcDateTime

ULID = String(26)
NAME = String(130)
ENUM = String(32)
# A tool call that wrote something: side effects stored other than the empty JSON list.
WROTE = "side_effects <> '[]'"
LIVE = "pruned_at IS NULL"


class Base(DeclarativeBase):
    pass


class PlanRow(Base):
    __tablename__ = "plans"

    plan_id: Mapped[str] = mapped_column(ULID, primary_key=True)
    action: Mapped[str] = mapped_column(Text)
    title: Mapped[str | None] = mapped_column(Text)
    project: Mapped[str | None] = mapped_column(Text)
    phase: Mapped[str] = mapped_column(ENUM)
    state: Mapped[str] = mapped_column(ENUM)
    attempt: Mapped[int] = mapped_column(Integer)
    parent_plan_id: Mapped[str | None] = mapped_column(ULID, ForeignKey("plans.plan_id"))
    spawning_decision_id: Mapped[str | None] = mapped_column(
        ULID,
        ForeignKey("decisions.decision_id", use_alter=True, name="fk_plans_spawning_decision"),
    )
    automation_profile: Mapped[str] = mapped_column(Text)
    version: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)

    __table_args__ = (
        Index("ix_plans_parent_plan_id", "parent_plan_id"),
        CheckConstraint("attempt >= 1", name="ck_plans_attempt"),
    )


class DecisionRow(Base):
    """Append-only: database triggers refuse DELETE and any UPDATE but setting superseded_by once."""

    __tablename__ = "decisions"

    decision_id: Mapped[str] = mapped_column(ULID, primary_key=True)
    plan_id: Mapped[str] = mapped_column(ULID, ForeignKey("plans.plan_id"))
    parent_decision_id: Mapped[str | None] = mapped_column(
        ULID, ForeignKey("decisions.decision_id")
    )
    sequence_number: Mapped[int] = mapped_column(Integer)
    decision_type: Mapped[str] = mapped_column(ENUM)
    phase: Mapped[str] = mapped_column(ENUM)
    question: Mapped[str] = mapped_column(Text)
    chosen_option: Mapped[str] = mapped_column(Text)
    alternatives_considered: Mapped[str] = mapped_column(Text)
    confidence_score: Mapped[float | None] = mapped_column(Float)
    hot_context_hash: Mapped[str | None] = mapped_column(String(64))
    hot_context_ref: Mapped[str | None] = mapped_column(Text)
    relevant_resources: Mapped[str] = mapped_column(Text)
    actor_state_ref: Mapped[str | None] = mapped_column(Text)
    rationale: Mapped[str | None] = mapped_column(Text)
    actor_reasoning: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    is_correction: Mapped[bool] = mapped_column(Boolean)
    corrects_decision_id: Mapped[str | None] = mapped_column(
        ULID, ForeignKey("decisions.decision_id")
    )
    correction_reason: Mapped[str | None] = mapped_column(Text)
    superseded_by: Mapped[str | None] = mapped_column(ULID, ForeignKey("decisions.decision_id"))
    step_key: Mapped[str | None] = mapped_column(String(64))

    __table_args__ = (
        UniqueConstraint("plan_id", "sequence_number", name="uq_decisions_plan_sequence"),
        Index("ix_decisions_parent_decision_id", "parent_decision_id"),
        # migration 0008: a plan's decisions of one type (guidance), of a few steps
        Index("ix_decisions_plan_type_sequence", "plan_id", "decision_type", "sequence_number"),
        Index("ix_decisions_plan_step_key", "plan_id", "step_key"),
        # migration 0012: what corrects or superseded a decision (set by corrections only)
        Index(
            "ix_decisions_corrects",
            "corrects_decision_id",
            sqlite_where=text("corrects_decision_id IS NOT NULL"),
            postgresql_where=text("corrects_decision_id IS NOT NULL"),
        ),
        Index(
            "ix_decisions_superseded_by",
            "superseded_by",
            sqlite_where=text("superseded_by IS NOT NULL"),
            postgresql_where=text("superseded_by IS NOT NULL"),
        ),
        CheckConstraint(
            "confidence_score IS NULL OR (confidence_score >= 0 AND confidence_score <= 1)",
            name="ck_decisions_confidence",
        ),
        CheckConstraint(
            "(is_correction AND corrects_decision_id IS NOT NULL) "
            "OR (NOT is_correction AND corrects_decision_id IS NULL)",
            name="ck_decisions_correction_pair",
        ),
        CheckConstraint("sequence_number >= 0", name="ck_decisions_sequence"),
    )


class DecisionDependencyRow(Base):
    __tablename__ = "decision_dependencies"

    dependency_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    upstream_decision_id: Mapped[str] = mapped_column(ULID, ForeignKey("decisions.decision_id"))
    downstream_ref: Mapped[str] = mapped_column(ULID)
    dependency_type: Mapped[str] = mapped_column(ENUM)

    __table_args__ = (
        UniqueConstraint(
            "upstream_decision_id", "downstream_ref", "dependency_type", name="uq_dependency_edge"
        ),
        Index("ix_decision_dependencies_downstream_ref", "downstream_ref"),
        CheckConstraint("dependency_type IN ('decision', 'plan')", name="ck_dependency_type"),
    )


class DecisionArtifactRow(Base):
    __tablename__ = "decision_artifacts"

    artifact_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    decision_id: Mapped[str] = mapped_column(ULID, ForeignKey("decisions.decision_id"))
    artifact_path: Mapped[str] = mapped_column(Text)
    artifact_type: Mapped[str] = mapped_column(Text)

    __table_args__ = (Index("ix_decision_artifacts_decision_id", "decision_id"),)


class ResourceRow(Base):
    __tablename__ = "resources"

    resource_id: Mapped[str] = mapped_column(NAME, primary_key=True)
    kind: Mapped[str] = mapped_column(Text)
    location: Mapped[str] = mapped_column(Text)
    sandbox_strategy: Mapped[str] = mapped_column(ENUM)
    checkpoint_enabled: Mapped[bool] = mapped_column(Boolean)
    checkpoint_max_per_plan: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    # Set by `agents resource remove` once plans used it: kept for their history.
    removed_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


class CheckpointGroupRow(Base):
    __tablename__ = "checkpoint_groups"

    group_id: Mapped[str] = mapped_column(ULID, primary_key=True)
    plan_id: Mapped[str] = mapped_column(ULID, ForeignKey("plans.plan_id"))
    decision_id: Mapped[str | None] = mapped_column(ULID, ForeignKey("decisions.decision_id"))
    status: Mapped[str] = mapped_column(ENUM)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    # JSON list of [resource_id, ref] made so far while pending (for crash recovery).
    pending_refs: Mapped[str] = mapped_column(Text, server_default="[]")

    __table_args__ = (
        Index("ix_checkpoint_groups_plan_id", "plan_id"),
        Index("ix_checkpoint_groups_decision_id", "decision_id"),
    )


class CheckpointMetadataRow(Base):
    __tablename__ = "checkpoint_metadata"

    checkpoint_id: Mapped[str] = mapped_column(ULID, primary_key=True)
    plan_id: Mapped[str] = mapped_column(ULID, ForeignKey("plans.plan_id"))
    group_id: Mapped[str | None] = mapped_column(ULID, ForeignKey("checkpoint_groups.group_id"))
    decision_id: Mapped[str | None] = mapped_column(ULID, ForeignKey("decisions.decision_id"))
    resource_id: Mapped[str] = mapped_column(NAME, ForeignKey("resources.resource_id"))
    checkpoint_type: Mapped[str] = mapped_column(ENUM)
    strategy: Mapped[str] = mapped_column(ENUM)
    ref: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    pruned_at: Mapped[datetime | None] = mapped_column(UtcDateTime)

    __table_args__ = (
        Index("ix_checkpoint_metadata_decision_id", "decision_id"),
        Index("ix_checkpoint_metadata_plan_id", "plan_id"),
        # migration 0009: a resource's live checkpoints, which each recording counts
        Index("ix_checkpoint_metadata_live", "plan_id", "resource_id", sqlite_where=text(LIVE)),
        # migration 0011: each resource's first checkpoint (a rollback's baselines)
        Index(
            "ix_checkpoint_metadata_plan_resource_created", "plan_id", "resource_id", "created_at"
        ),
    )


class ToolInvocationRow(Base):
    __tablename__ = "tool_invocations"

    invocation_id: Mapped[str] = mapped_column(ULID, primary_key=True)
    plan_id: Mapped[str] = mapped_column(ULID, ForeignKey("plans.plan_id"))
    decision_id: Mapped[str] = mapped_column(ULID, ForeignKey("decisions.decision_id"))
    tool: Mapped[str] = mapped_column(Text)
    arguments: Mapped[str] = mapped_column(Text)
    side_effects: Mapped[str] = mapped_column(Text)
    irreversible: Mapped[bool] = mapped_column(Boolean)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    ok: Mapped[bool | None] = mapped_column(Boolean)
    output: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        Index("ix_tool_invocations_decision_id", "decision_id"),
        # migration 0008: usage counts by plan; the calls that wrote something, by plan
        Index("ix_tool_invocations_plan_id", "plan_id"),
        Index(
            "ix_tool_invocations_plan_writes",
            "plan_id",
            "decision_id",
            # partial on both backends (migration 0008); only SQLite's option is named here,
            # as naming PostgreSQL's loads its dialect into every command on SQLite
            sqlite_where=text(WROTE),
        ),
        # migration 0010: the calls that wrote something, by the resource they name (a
        # partial expression index, json_extract(arguments, '$.resource') on SQLite, whose
        # expression indexes are not reflected: PostgreSQL's is the one compared)
        Index(
            "ix_tool_invocations_plan_resource_writes",
            "plan_id",
            text("(CAST(arguments AS JSONB) ->> 'resource')"),
        ),
    )


class CorrectionAttemptRow(Base):
    __tablename__ = "correction_attempts"

    correction_id: Mapped[str] = mapped_column(ULID, primary_key=True)
    plan_id: Mapped[str] = mapped_column(ULID, ForeignKey("plans.plan_id"))
    target_decision_id: Mapped[str] = mapped_column(ULID, ForeignKey("decisions.decision_id"))
    mode: Mapped[str] = mapped_column(ENUM)
    guidance: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(ENUM)
    attempt: Mapped[int] = mapped_column(Integer)
    replacement_decision_id: Mapped[str | None] = mapped_column(
        ULID, ForeignKey("decisions.decision_id")
    )
    appended_plan_id: Mapped[str | None] = mapped_column(ULID, ForeignKey("plans.plan_id"))
    requested_by: Mapped[str | None] = mapped_column(Text)
    report: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime)

    __table_args__ = (Index("ix_correction_attempts_plan_id", "plan_id"),)


class AutomationProfileRow(Base):
    __tablename__ = "automation_profiles"

    name: Mapped[str] = mapped_column(NAME, primary_key=True)
    description: Mapped[str | None] = mapped_column(Text)
    definition: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)


class ApprovalRow(Base):
    """A pending human decision (escalation, Apply gate, spawn, budget pause) and its answer."""

    __tablename__ = "approvals"

    approval_id: Mapped[str] = mapped_column(ULID, primary_key=True)
    plan_id: Mapped[str] = mapped_column(ULID, ForeignKey("plans.plan_id"))
    decision_id: Mapped[str | None] = mapped_column(ULID, ForeignKey("decisions.decision_id"))
    kind: Mapped[str] = mapped_column(ENUM)
    question: Mapped[str] = mapped_column(Text)
    details: Mapped[str] = mapped_column(Text)
    requested_at: Mapped[datetime] = mapped_column(UtcDateTime)
    answer: Mapped[str | None] = mapped_column(ENUM)
    answered_by: Mapped[str | None] = mapped_column(Text)
    reason: Mapped[str | None] = mapped_column(Text)
    answered_at: Mapped[datetime | None] = mapped_column(UtcDateTime)

    __table_args__ = (Index("ix_approvals_plan_id", "plan_id"),)


class EventRow(Base):
    """The append-only audit log: who did what to which plan, and when."""

    __tablename__ = "events"

    event_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    plan_id: Mapped[str | None] = mapped_column(ULID, ForeignKey("plans.plan_id"))
    kind: Mapped[str] = mapped_column(String(64))
    actor: Mapped[str | None] = mapped_column(Text)
    payload: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    # migration 0013: a model call's cost (payload's cost_usd), summed by safety.max_total_cost
    cost_usd: Mapped[float | None] = mapped_column(Float)

    __table_args__ = (
        Index("ix_events_plan_id", "plan_id"),
        # migration 0013: every plan's model calls' costs, summed from the index alone
        # (kind too: SQLite covers only a query whose every column is in the index)
        Index(
            "ix_events_model_cost",
            "kind",
            "cost_usd",
            sqlite_where=text("kind = 'model_usage'"),
            postgresql_where=text("kind = 'model_usage'"),
        ),
    )


class SettingRow(Base):
    """A configuration value; ``scope`` is ``global`` or ``project:<name>``; value is JSON."""

    __tablename__ = "settings"

    scope: Mapped[str] = mapped_column(String(160), primary_key=True)
    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    value: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


class PlanActionRow(Base):
    """The action definition (JSON) a plan was created from."""

    __tablename__ = "plan_actions"

    plan_id: Mapped[str] = mapped_column(ULID, ForeignKey("plans.plan_id"), primary_key=True)
    definition: Mapped[str] = mapped_column(Text)
    # Set when the plan works in another plan's sandboxes (an append-mode correction).
    sandbox_plan_id: Mapped[str | None] = mapped_column(ULID)


class ActionRow(Base):
    """An action registered with ``agents action create``: its validated definition (JSON)."""

    __tablename__ = "actions"

    name: Mapped[str] = mapped_column(NAME, primary_key=True)
    definition: Mapped[str] = mapped_column(Text)
    source: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


class ContextBlobRow(Base):
    """The full context a decision was made in, addressed by its SHA-256."""

    __tablename__ = "context_blobs"

    context_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    body: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)


class ApplyJournalRow(Base):
    """One resource of an Apply: ``planned`` → ``landing`` → ``landed``, each written before
    the step it names; ``landed`` (JSON) is what landing left on the real resource."""

    __tablename__ = "apply_journal"

    plan_id: Mapped[str] = mapped_column(ULID, ForeignKey("plans.plan_id"), primary_key=True)
    attempt: Mapped[int] = mapped_column(Integer, primary_key=True)
    resource_id: Mapped[str] = mapped_column(NAME, primary_key=True)
    position: Mapped[int] = mapped_column(Integer)
    strategy: Mapped[str] = mapped_column(ENUM)
    state: Mapped[str] = mapped_column(ENUM)
    landed: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)

    __table_args__ = (
        CheckConstraint("state IN ('planned', 'landing', 'landed')", name="ck_apply_journal_state"),
    )
