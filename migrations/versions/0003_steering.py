"""What users steer and bring: incognito spans, memory exclusions, pins and edits, personas, cards.

- messages.memory_excluded: 'incognito' or 'forgotten'; formation never forms such an exchange.
- memories.pinned and memories.edited_at.
- personalities.card: a character card's fields that have no column of their own.
- personas and incognito_sessions: new tables.

Revision ID: 0003_steering
Revises: 0002_reply_to
Create Date: 2026-11-22 17:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003_steering"
down_revision: str | None = "0002_reply_to"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("messages", sa.Column("memory_excluded", sa.String(length=12), nullable=True))
    op.create_check_constraint(
        op.f("ck_messages_memory_excluded"), "messages", "memory_excluded IN ('incognito', 'forgotten')"
    )
    op.add_column("memories", sa.Column("pinned", sa.Boolean(), server_default=sa.text("false"), nullable=False))
    op.add_column("memories", sa.Column("edited_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("personalities", sa.Column("card", postgresql.JSONB(astext_type=sa.Text()), nullable=True))
    op.create_table(
        "personas",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("personality_id", sa.Integer(), nullable=True),
        sa.Column("name", sa.String(length=80), nullable=False),
        sa.Column("pronouns", sa.String(length=40), nullable=True),
        sa.Column("about", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(
            ["personality_id"],
            ["personalities.id"],
            name=op.f("fk_personas_personality_id_personalities"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_personas")),
    )
    op.create_index(
        "uq_personas_global",
        "personas",
        ["user_id"],
        unique=True,
        postgresql_where=sa.text("personality_id IS NULL"),
    )
    op.create_index(
        "uq_personas_personality",
        "personas",
        ["user_id", "personality_id"],
        unique=True,
        postgresql_where=sa.text("personality_id IS NOT NULL"),
    )
    op.create_table(
        "incognito_sessions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("personality_id", sa.Integer(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("ends_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["personality_id"],
            ["personalities.id"],
            name=op.f("fk_incognito_sessions_personality_id_personalities"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_incognito_sessions")),
    )
    op.create_index(op.f("ix_incognito_sessions_user_id"), "incognito_sessions", ["user_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_incognito_sessions_user_id"), table_name="incognito_sessions")
    op.drop_table("incognito_sessions")
    op.drop_index("uq_personas_personality", table_name="personas")
    op.drop_index("uq_personas_global", table_name="personas")
    op.drop_table("personas")
    op.drop_column("personalities", "card")
    op.drop_column("memories", "edited_at")
    op.drop_column("memories", "pinned")
    op.drop_constraint(op.f("ck_messages_memory_excluded"), "messages", type_="check")
    op.drop_column("messages", "memory_excluded")
