"""Memories indexed by owner, conversation and time (recall reads a hit's neighbours by it).

It replaces the (personality_id, user_id) index, whose lookups it serves as its prefix.

Revision ID: 0004_memory_threads
Revises: 0003_steering
Create Date: 2026-11-22 18:30:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0004_memory_threads"
down_revision: str | None = "0003_steering"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_memories_owner_thread",
        "memories",
        ["personality_id", "user_id", "conversation_id", "occurred_at"],
        unique=False,
    )
    op.drop_index("ix_memories_owner", table_name="memories")


def downgrade() -> None:
    op.create_index("ix_memories_owner", "memories", ["personality_id", "user_id"], unique=False)
    op.drop_index("ix_memories_owner_thread", table_name="memories")
