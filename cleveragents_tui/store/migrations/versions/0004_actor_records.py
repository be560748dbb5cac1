"""What running actors record: the action a plan runs, full decision contexts, step keys.

- ``plan_actions``: the action definition each plan was created from (JSON), so a plan can
  be resumed or corrected after a restart with exactly what it started with.
- ``context_blobs``: the full serialised context of a decision, addressed by its SHA-256
  (``decisions.hot_context_hash``; ``hot_context_ref`` is ``context:<hash>``).
- ``tool_invocations.ok`` / ``output``: how each call went (output shortened).
- ``decisions.step_key``: the key of the action's decision point that produced a decision.
  The SQLite append-only trigger lists every column, so it is recreated with this one.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from cleveragents_tui.store.migrations.append_only import (
    DECISION_COLUMNS_0001,
    sqlite_supersede_only,
)
from cleveragents_tui.store.types import UtcDateTime

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    op.create_table(
        "plan_actions",
        sa.Column("plan_id", sa.String(26), sa.ForeignKey("plans.plan_id"), primary_key=True),
        sa.Column("definition", sa.Text(), nullable=False),
    )
    op.create_table(
        "context_blobs",
        sa.Column("context_hash", sa.String(64), primary_key=True),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
    )
    with op.batch_alter_table("tool_invocations") as batch:
        batch.add_column(sa.Column("ok", sa.Boolean()))
        batch.add_column(sa.Column("output", sa.Text()))
    if sqlite:
        op.execute("DROP TRIGGER decisions_supersede_only")
        op.execute("ALTER TABLE decisions ADD COLUMN step_key VARCHAR(64)")
        op.execute(sqlite_supersede_only((*DECISION_COLUMNS_0001, "step_key")))
    else:
        # The PostgreSQL trigger compares whole rows, so a new column is covered as it is.
        op.add_column("decisions", sa.Column("step_key", sa.String(64)))
