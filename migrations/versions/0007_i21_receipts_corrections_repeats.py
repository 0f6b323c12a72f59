"""Memory users can see and correct (issue 21): reply receipts, forgotten claims, repeats, fresh mode.

- reply_memories: the memories that went into a reply's prompt, by the message it answers.
- forgotten_claims: the embedding and key facts of what a user forgot or corrected.
- memories.times_said, last_said_at: a repeat reinforces a memory instead of adding a row;
  memories.repeat_of: a repeat said in another conversation; memories.forgotten_claim_id: a memory
  restating a forgotten claim, left out of recall.
- user_settings.fresh: replies use no long-term memories.

Revision ID: 0007_i21_receipts_corrections
Revises: 0006_i20_venue_keys
Create Date: 2026-11-26 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0007_i21_receipts_corrections"
down_revision: str | None = "0006_i20_venue_keys"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "forgotten_claims",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("personality_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("memory_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("kind", sa.String(length=12), nullable=False),
        sa.Column("embedding", postgresql.ARRAY(sa.REAL()), nullable=False),
        sa.Column("embedding_model", sa.String(length=200), nullable=False),
        sa.Column("facts", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("corrected_to", postgresql.ARRAY(sa.REAL()), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("kind IN ('forgotten', 'corrected')", name=op.f("ck_forgotten_claims_kind")),
        sa.ForeignKeyConstraint(
            ["personality_id"],
            ["personalities.id"],
            name=op.f("fk_forgotten_claims_personality_id_personalities"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_forgotten_claims")),
    )
    op.create_index("ix_forgotten_claims_owner", "forgotten_claims", ["personality_id", "user_id"])
    op.create_table(
        "reply_memories",
        sa.Column("answered_message_id", sa.BigInteger(), nullable=False),
        sa.Column("memory_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("reason", sa.String(length=8), nullable=False),
        sa.CheckConstraint("reason IN ('pinned', 'rank', 'context')", name=op.f("ck_reply_memories_reason")),
        sa.ForeignKeyConstraint(
            ["answered_message_id"],
            ["messages.id"],
            name=op.f("fk_reply_memories_answered_message_id_messages"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("answered_message_id", "memory_id", name=op.f("pk_reply_memories")),
    )
    op.add_column("memories", sa.Column("times_said", sa.Integer(), server_default=sa.text("1"), nullable=False))
    op.add_column("memories", sa.Column("last_said_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("memories", sa.Column("repeat_of", postgresql.UUID(as_uuid=True), nullable=True))
    op.create_foreign_key(
        op.f("fk_memories_repeat_of_memories"), "memories", "memories", ["repeat_of"], ["id"], ondelete="SET NULL"
    )
    op.add_column("memories", sa.Column("forgotten_claim_id", sa.Integer(), nullable=True))
    op.create_foreign_key(
        op.f("fk_memories_forgotten_claim_id_forgotten_claims"),
        "memories",
        "forgotten_claims",
        ["forgotten_claim_id"],
        ["id"],
        ondelete="SET NULL",
    )
    op.add_column("user_settings", sa.Column("fresh", sa.Boolean(), nullable=True))


def downgrade() -> None:
    op.drop_column("user_settings", "fresh")
    op.drop_constraint(op.f("fk_memories_forgotten_claim_id_forgotten_claims"), "memories", type_="foreignkey")
    op.drop_column("memories", "forgotten_claim_id")
    op.drop_constraint(op.f("fk_memories_repeat_of_memories"), "memories", type_="foreignkey")
    op.drop_column("memories", "repeat_of")
    op.drop_column("memories", "last_said_at")
    op.drop_column("memories", "times_said")
    op.drop_table("reply_memories")
    op.drop_index("ix_forgotten_claims_owner", table_name="forgotten_claims")
    op.drop_table("forgotten_claims")
