"""``plan_actions.sandbox_plan_id``: a plan that works in another plan's sandboxes.

An append-mode correction's corrective plan continues from its parent's outcome, so it runs
in the parent's sandboxes instead of fresh copies of the real resources.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("plan_actions") as batch:
        batch.add_column(sa.Column("sandbox_plan_id", sa.String(26)))
