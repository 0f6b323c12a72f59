"""A card's picture is kept (issue 34): personality_pictures, the PNG a card came in, so that an
export without a picture of its own gives the card back in it.

Revision ID: 0011_i34_card_picture
Revises: 0009_i33_poison
Create Date: 2026-11-27 16:15:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011_i34_card_picture"
down_revision: str | None = "0009_i33_poison"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "personality_pictures",
        sa.Column("personality_id", sa.Integer(), nullable=False),
        sa.Column("png", sa.LargeBinary(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(
            ["personality_id"],
            ["personalities.id"],
            name=op.f("fk_personality_pictures_personality_id_personalities"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("personality_id", name=op.f("pk_personality_pictures")),
    )


def downgrade() -> None:
    op.drop_table("personality_pictures")
