"""Supersession (issue 31): a corrected or forgotten claim retires every memory that states it.

- memories.superseded_at: when a correction or a forgetting superseded the memory (with
  memories.forgotten_claim_id, the claim that did); kept for export and audit, left out of recall.
- forgotten_claims.corrected_text: what is right, the correction's words when it was made.
- forgotten_claims.restated_at: when the user said the claim again: their newest word, remembered;
  the claim no longer holds new memories back (the memories it superseded stay superseded).

Revision ID: 0008_i31_supersession
Revises: 0007_i21_receipts_corrections
Create Date: 2026-11-27 15:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008_i31_supersession"
down_revision: str | None = "0007_i21_receipts_corrections"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("memories", sa.Column("superseded_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("forgotten_claims", sa.Column("corrected_text", sa.Text(), nullable=True))
    op.add_column("forgotten_claims", sa.Column("restated_at", sa.DateTime(timezone=True), nullable=True))
    # Memories silenced before this revision were superseded when their claim was recorded.
    op.execute(
        "UPDATE memories SET superseded_at = forgotten_claims.created_at FROM forgotten_claims "
        "WHERE memories.forgotten_claim_id = forgotten_claims.id"
    )


def downgrade() -> None:
    op.drop_column("forgotten_claims", "restated_at")
    op.drop_column("forgotten_claims", "corrected_text")
    op.drop_column("memories", "superseded_at")
