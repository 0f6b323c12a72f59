"""Refused messages are stored as refused (issue 33): messages.memory_excluded takes 'refused', a
message the bot declined (over the flood limit), so that catch-up never reads it back as missed and
formation never makes a memory of it.

Revision ID: 0012_i33_refused
Revises: 0011_i34_card_picture
Create Date: 2026-11-27 16:30:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0012_i33_refused"
down_revision: str | None = "0011_i34_card_picture"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_constraint(op.f("ck_messages_memory_excluded"), "messages", type_="check")
    op.create_check_constraint(
        op.f("ck_messages_memory_excluded"),
        "messages",
        "memory_excluded IN ('incognito', 'forgotten', 'refused')",
    )


def downgrade() -> None:
    # A refused message must still never become a memory: 'forgotten' keeps it out the same way.
    op.execute("UPDATE messages SET memory_excluded = 'forgotten' WHERE memory_excluded = 'refused'")
    op.drop_constraint(op.f("ck_messages_memory_excluded"), "messages", type_="check")
    op.create_check_constraint(
        op.f("ck_messages_memory_excluded"), "messages", "memory_excluded IN ('incognito', 'forgotten')"
    )
