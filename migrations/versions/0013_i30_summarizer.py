"""Memories say more exactly why the model's text is not theirs: an answer about another exchange, an
answer cut mid-sentence, a fact given to the wrong speaker or a question stated as one
(misattributed), a summary not smaller than the exchange, a model too slow for LLM_TIMEOUT.

Revision ID: 0013_i30_summarizer
Revises: 0012_i33_refused
Create Date: 2026-11-27 15:30:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0013_i30_summarizer"
down_revision: str | None = "0012_i33_refused"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BEFORE = "'no_model', 'config', 'unreachable', 'refused', 'invented', 'other_user', 'unparseable'"
AFTER = f"{BEFORE}, 'timeout', 'off_exchange', 'cut', 'not_smaller', 'misattributed'"


def upgrade() -> None:
    op.drop_constraint(op.f("ck_memories_summary_fallback"), "memories", type_="check")
    op.create_check_constraint(op.f("ck_memories_summary_fallback"), "memories", f"summary_fallback IN ({AFTER})")


def downgrade() -> None:
    # The new reasons become the nearest old ones: a slow model was reported unreachable before.
    op.execute("UPDATE memories SET summary_fallback = 'unreachable' WHERE summary_fallback = 'timeout'")
    op.execute(
        "UPDATE memories SET summary_fallback = 'unparseable' "
        "WHERE summary_fallback IN ('off_exchange', 'cut', 'not_smaller', 'misattributed')"
    )
    op.drop_constraint(op.f("ck_memories_summary_fallback"), "memories", type_="check")
    op.create_check_constraint(op.f("ck_memories_summary_fallback"), "memories", f"summary_fallback IN ({BEFORE})")
