"""Indexes for large plans (issue 22): reads that start from a plan but want a few of its rows.

- ``decisions (plan_id, decision_type, sequence_number)``: a plan's corrections' guidance
  decisions (every preview and execute reads them to find restore points) without reading
  every decision of the plan.
- ``decisions (plan_id, step_key)``: the current decisions of an action's few steps (a
  correction's alternatives) without every decision of the plan.
- ``tool_invocations (plan_id)``: the usage counts checked before each step (policing) and
  ``agents plan show``, which otherwise read the whole table.
- ``tool_invocations (plan_id, decision_id)`` of the calls with side effects only (a partial
  index): a revert's later writers are found among the calls that wrote something, not
  among every later decision of the plan.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

WROTE = sa.text("side_effects <> '[]'")


def upgrade() -> None:
    op.create_index(
        "ix_decisions_plan_type_sequence",
        "decisions",
        ["plan_id", "decision_type", "sequence_number"],
    )
    op.create_index("ix_decisions_plan_step_key", "decisions", ["plan_id", "step_key"])
    op.create_index("ix_tool_invocations_plan_id", "tool_invocations", ["plan_id"])
    op.create_index(
        "ix_tool_invocations_plan_writes",
        "tool_invocations",
        ["plan_id", "decision_id"],
        sqlite_where=WROTE,
        postgresql_where=WROTE,
    )


def downgrade() -> None:
    op.drop_index("ix_tool_invocations_plan_writes", "tool_invocations")
    op.drop_index("ix_tool_invocations_plan_id", "tool_invocations")
    op.drop_index("ix_decisions_plan_step_key", "decisions")
    op.drop_index("ix_decisions_plan_type_sequence", "decisions")
