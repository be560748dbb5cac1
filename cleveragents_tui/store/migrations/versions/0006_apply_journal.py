"""``apply_journal``: one row per resource of an Apply, so a crash anywhere in it is finished.

Each row goes ``planned`` → ``landing`` → ``landed``, written before the step it names;
``landed`` holds what landing left on the real resource (a branch and commit, a file set
with hashes, a database commit). A rerun of the Apply skips what landed and finishes the
rest (docs/reliability.md, "Apply is a journal").

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from cleveragents_tui.store.types import UtcDateTime

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "apply_journal",
        sa.Column("plan_id", sa.String(26), sa.ForeignKey("plans.plan_id"), primary_key=True),
        sa.Column("attempt", sa.Integer(), primary_key=True),
        sa.Column("resource_id", sa.String(130), primary_key=True),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("strategy", sa.String(32), nullable=False),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("landed", sa.Text()),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.CheckConstraint(
            "state IN ('planned', 'landing', 'landed')", name="ck_apply_journal_state"
        ),
    )
