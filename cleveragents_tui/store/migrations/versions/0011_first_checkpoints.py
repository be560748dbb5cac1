"""An index of a plan's checkpoints by resource and time (issue 22).

``checkpoint_metadata (plan_id, resource_id, created_at)``: a rollback's targets and a
preview read each resource's first checkpoint of the plan (its baseline) and the restore
point's group, not every checkpoint the plan took — a group at every Execute decision makes
those grow with the plan. With this index each resource's first is found without reading
the others (``store/repositories/checkpoints.py``, ``first_of_each_resource``).

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

NAME = "ix_checkpoint_metadata_plan_resource_created"


def upgrade() -> None:
    op.create_index(NAME, "checkpoint_metadata", ["plan_id", "resource_id", "created_at"])


def downgrade() -> None:
    op.drop_index(NAME, "checkpoint_metadata")
