"""An index of a plan's live checkpoints per resource (issue 22).

``checkpoint_metadata (plan_id, resource_id)`` of the rows not pruned (a partial index):
every recorded Execute decision counts and prunes each resource's live checkpoints against
its budget; without it that read went through every checkpoint row of the plan, so
recording grew slower with the plan's size.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

LIVE = sa.text("pruned_at IS NULL")


def upgrade() -> None:
    op.create_index(
        "ix_checkpoint_metadata_live",
        "checkpoint_metadata",
        ["plan_id", "resource_id"],
        sqlite_where=LIVE,
        postgresql_where=LIVE,
    )


def downgrade() -> None:
    op.drop_index("ix_checkpoint_metadata_live", "checkpoint_metadata")
