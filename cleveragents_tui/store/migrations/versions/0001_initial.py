"""The initial schema: plans, decisions and everything recorded around them.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from cleveragents_tui.store.migrations.append_only import (
    APPEND_ONLY_MESSAGE,
    DECISION_COLUMNS_0001,
    sqlite_supersede_only,
)
from cleveragents_tui.store.types import UtcDateTime

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

ULID = sa.String(26)
NAME = sa.String(130)
ENUM = sa.String(32)


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    op.create_table(
        "plans",
        sa.Column("plan_id", ULID, primary_key=True),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("title", sa.Text()),
        sa.Column("project", sa.Text()),
        sa.Column("phase", ENUM, nullable=False),
        sa.Column("state", ENUM, nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("parent_plan_id", ULID, sa.ForeignKey("plans.plan_id")),
        # SQLite checks foreign keys at write time, so it may name a table created below;
        # PostgreSQL gets this constraint once decisions exists.
        sa.Column(
            "spawning_decision_id",
            ULID,
            *(
                [sa.ForeignKey("decisions.decision_id", name="fk_plans_spawning_decision")]
                if sqlite
                else []
            ),
        ),
        sa.Column("automation_profile", sa.Text(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.CheckConstraint("attempt >= 1", name="ck_plans_attempt"),
    )
    op.create_index("ix_plans_parent_plan_id", "plans", ["parent_plan_id"])

    op.create_table(
        "decisions",
        sa.Column("decision_id", ULID, primary_key=True),
        sa.Column("plan_id", ULID, sa.ForeignKey("plans.plan_id"), nullable=False),
        sa.Column("parent_decision_id", ULID, sa.ForeignKey("decisions.decision_id")),
        sa.Column("sequence_number", sa.Integer(), nullable=False),
        sa.Column("decision_type", ENUM, nullable=False),
        sa.Column("phase", ENUM, nullable=False),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("chosen_option", sa.Text(), nullable=False),
        sa.Column("alternatives_considered", sa.Text(), nullable=False),
        sa.Column("confidence_score", sa.Float()),
        sa.Column("hot_context_hash", sa.String(64)),
        sa.Column("hot_context_ref", sa.Text()),
        sa.Column("relevant_resources", sa.Text(), nullable=False),
        sa.Column("actor_state_ref", sa.Text()),
        sa.Column("rationale", sa.Text()),
        sa.Column("actor_reasoning", sa.Text()),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("is_correction", sa.Boolean(), nullable=False),
        sa.Column("corrects_decision_id", ULID, sa.ForeignKey("decisions.decision_id")),
        sa.Column("correction_reason", sa.Text()),
        sa.Column("superseded_by", ULID, sa.ForeignKey("decisions.decision_id")),
        sa.UniqueConstraint("plan_id", "sequence_number", name="uq_decisions_plan_sequence"),
        sa.CheckConstraint(
            "confidence_score IS NULL OR (confidence_score >= 0 AND confidence_score <= 1)",
            name="ck_decisions_confidence",
        ),
        sa.CheckConstraint(
            "(is_correction AND corrects_decision_id IS NOT NULL) "
            "OR (NOT is_correction AND corrects_decision_id IS NULL)",
            name="ck_decisions_correction_pair",
        ),
        sa.CheckConstraint("sequence_number >= 0", name="ck_decisions_sequence"),
    )
    op.create_index("ix_decisions_parent_decision_id", "decisions", ["parent_decision_id"])
    if not sqlite:
        op.create_foreign_key(
            "fk_plans_spawning_decision",
            "plans",
            "decisions",
            ["spawning_decision_id"],
            ["decision_id"],
        )

    op.create_table(
        "decision_dependencies",
        sa.Column("dependency_id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column(
            "upstream_decision_id", ULID, sa.ForeignKey("decisions.decision_id"), nullable=False
        ),
        sa.Column("downstream_ref", ULID, nullable=False),
        sa.Column("dependency_type", ENUM, nullable=False),
        sa.UniqueConstraint(
            "upstream_decision_id", "downstream_ref", "dependency_type", name="uq_dependency_edge"
        ),
        sa.CheckConstraint("dependency_type IN ('decision', 'plan')", name="ck_dependency_type"),
    )
    op.create_index(
        "ix_decision_dependencies_downstream_ref", "decision_dependencies", ["downstream_ref"]
    )

    op.create_table(
        "decision_artifacts",
        sa.Column("artifact_id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("decision_id", ULID, sa.ForeignKey("decisions.decision_id"), nullable=False),
        sa.Column("artifact_path", sa.Text(), nullable=False),
        sa.Column("artifact_type", sa.Text(), nullable=False),
    )
    op.create_index("ix_decision_artifacts_decision_id", "decision_artifacts", ["decision_id"])

    op.create_table(
        "resources",
        sa.Column("resource_id", NAME, primary_key=True),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("location", sa.Text(), nullable=False),
        sa.Column("sandbox_strategy", ENUM, nullable=False),
        sa.Column("checkpoint_enabled", sa.Boolean(), nullable=False),
        sa.Column("checkpoint_max_per_plan", sa.Integer(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
    )

    op.create_table(
        "checkpoint_groups",
        sa.Column("group_id", ULID, primary_key=True),
        sa.Column("plan_id", ULID, sa.ForeignKey("plans.plan_id"), nullable=False),
        sa.Column("decision_id", ULID, sa.ForeignKey("decisions.decision_id")),
        sa.Column("status", ENUM, nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
    )
    op.create_index("ix_checkpoint_groups_plan_id", "checkpoint_groups", ["plan_id"])
    op.create_index("ix_checkpoint_groups_decision_id", "checkpoint_groups", ["decision_id"])

    op.create_table(
        "checkpoint_metadata",
        sa.Column("checkpoint_id", ULID, primary_key=True),
        sa.Column("plan_id", ULID, sa.ForeignKey("plans.plan_id"), nullable=False),
        sa.Column("group_id", ULID, sa.ForeignKey("checkpoint_groups.group_id")),
        sa.Column("decision_id", ULID, sa.ForeignKey("decisions.decision_id")),
        sa.Column("resource_id", NAME, sa.ForeignKey("resources.resource_id"), nullable=False),
        sa.Column("checkpoint_type", ENUM, nullable=False),
        sa.Column("strategy", ENUM, nullable=False),
        sa.Column("ref", sa.Text(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
    )
    op.create_index("ix_checkpoint_metadata_decision_id", "checkpoint_metadata", ["decision_id"])
    op.create_index("ix_checkpoint_metadata_plan_id", "checkpoint_metadata", ["plan_id"])

    op.create_table(
        "tool_invocations",
        sa.Column("invocation_id", ULID, primary_key=True),
        sa.Column("plan_id", ULID, sa.ForeignKey("plans.plan_id"), nullable=False),
        sa.Column("decision_id", ULID, sa.ForeignKey("decisions.decision_id"), nullable=False),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("arguments", sa.Text(), nullable=False),
        sa.Column("side_effects", sa.Text(), nullable=False),
        sa.Column("irreversible", sa.Boolean(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
    )
    op.create_index("ix_tool_invocations_decision_id", "tool_invocations", ["decision_id"])

    op.create_table(
        "correction_attempts",
        sa.Column("correction_id", ULID, primary_key=True),
        sa.Column("plan_id", ULID, sa.ForeignKey("plans.plan_id"), nullable=False),
        sa.Column(
            "target_decision_id", ULID, sa.ForeignKey("decisions.decision_id"), nullable=False
        ),
        sa.Column("mode", ENUM, nullable=False),
        sa.Column("guidance", sa.Text(), nullable=False),
        sa.Column("status", ENUM, nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("replacement_decision_id", ULID, sa.ForeignKey("decisions.decision_id")),
        sa.Column("appended_plan_id", ULID, sa.ForeignKey("plans.plan_id")),
        sa.Column("requested_by", sa.Text()),
        sa.Column("report", sa.Text(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("finished_at", UtcDateTime()),
    )
    op.create_index("ix_correction_attempts_plan_id", "correction_attempts", ["plan_id"])

    op.create_table(
        "automation_profiles",
        sa.Column("name", NAME, primary_key=True),
        sa.Column("description", sa.Text()),
        sa.Column("definition", sa.Text(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
    )

    op.create_table(
        "approvals",
        sa.Column("approval_id", ULID, primary_key=True),
        sa.Column("plan_id", ULID, sa.ForeignKey("plans.plan_id"), nullable=False),
        sa.Column("decision_id", ULID, sa.ForeignKey("decisions.decision_id")),
        sa.Column("kind", ENUM, nullable=False),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("details", sa.Text(), nullable=False),
        sa.Column("requested_at", UtcDateTime(), nullable=False),
        sa.Column("answer", ENUM),
        sa.Column("answered_by", sa.Text()),
        sa.Column("reason", sa.Text()),
        sa.Column("answered_at", UtcDateTime()),
    )
    op.create_index("ix_approvals_plan_id", "approvals", ["plan_id"])

    op.create_table(
        "events",
        sa.Column("event_id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("plan_id", ULID, sa.ForeignKey("plans.plan_id")),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("actor", sa.Text()),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
    )
    op.create_index("ix_events_plan_id", "events", ["plan_id"])

    if sqlite:
        _sqlite_append_only_triggers()
    else:
        _postgresql_append_only_triggers()


def _sqlite_append_only_triggers() -> None:
    op.execute(
        "CREATE TRIGGER decisions_no_delete BEFORE DELETE ON decisions "
        f"BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY_MESSAGE}: a decision is never deleted'); END"
    )
    op.execute(sqlite_supersede_only(DECISION_COLUMNS_0001))


def _postgresql_append_only_triggers() -> None:
    op.execute(
        f"""
        CREATE FUNCTION decisions_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            probe decisions%ROWTYPE;
        BEGIN
            IF TG_OP IN ('DELETE', 'TRUNCATE') THEN
                RAISE EXCEPTION '{APPEND_ONLY_MESSAGE}: a decision is never deleted';
            END IF;
            probe := NEW;
            probe.superseded_by := NULL;
            IF OLD.superseded_by IS NOT NULL OR NEW.superseded_by IS NULL
               OR probe IS DISTINCT FROM OLD THEN
                RAISE EXCEPTION '{APPEND_ONLY_MESSAGE}: only superseded_by may be set, once';
            END IF;
            RETURN NEW;
        END;
        $$
        """
    )
    op.execute(
        "CREATE TRIGGER decisions_append_only BEFORE UPDATE OR DELETE ON decisions "
        "FOR EACH ROW EXECUTE FUNCTION decisions_append_only()"
    )
    op.execute(
        "CREATE TRIGGER decisions_no_truncate BEFORE TRUNCATE ON decisions "
        "FOR EACH STATEMENT EXECUTE FUNCTION decisions_append_only()"
    )
