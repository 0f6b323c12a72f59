"""Memories record why their summary is extractive (no model, unreachable, refused, invented facts...).

Revision ID: 0005_i18_summary_fallback
Revises: 0004_memory_threads
Create Date: 2026-11-25 16:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_i18_summary_fallback"
down_revision: str | None = "0004_memory_threads"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

REASONS = "'no_model', 'config', 'unreachable', 'refused', 'invented', 'other_user', 'unparseable'"


def upgrade() -> None:
    op.add_column("memories", sa.Column("summary_fallback", sa.String(length=20), nullable=True))
    op.create_check_constraint(
        op.f("ck_memories_summary_fallback"), "memories", f"summary_fallback IN ({REASONS})"
    )


def downgrade() -> None:
    op.drop_constraint(op.f("ck_memories_summary_fallback"), "memories", type_="check")
    op.drop_column("memories", "summary_fallback")
