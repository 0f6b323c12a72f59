"""Each reply records the user message it answers (messages.reply_to_id).

Existing replies are linked to the nearest preceding user message of their conversation: the pairing
memory formation used until now, so what was remembered before reads the same.

Revision ID: 0002_reply_to
Revises: 0001
Create Date: 2026-11-28 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002_reply_to"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# One pass with a window: for every row, the largest user-message id so far in its conversation.
FILL_REPLY_LINKS = """
UPDATE messages AS reply
SET reply_to_id = answered.user_message_id
FROM (
    SELECT id, max(id) FILTER (WHERE role = 'user')
        OVER (PARTITION BY conversation_id ORDER BY id) AS user_message_id
    FROM messages
) AS answered
WHERE reply.id = answered.id
  AND reply.role = 'assistant'
  AND answered.user_message_id IS NOT NULL
"""


def upgrade() -> None:
    op.add_column("messages", sa.Column("reply_to_id", sa.BigInteger(), nullable=True))
    op.create_foreign_key(
        op.f("fk_messages_reply_to_id_messages"),
        "messages",
        "messages",
        ["reply_to_id"],
        ["id"],
        ondelete="SET NULL",
    )
    op.create_index(op.f("ix_messages_reply_to_id"), "messages", ["reply_to_id"], unique=False)
    op.execute(FILL_REPLY_LINKS)


def downgrade() -> None:
    op.drop_index(op.f("ix_messages_reply_to_id"), table_name="messages")
    op.drop_constraint(op.f("fk_messages_reply_to_id_messages"), "messages", type_="foreignkey")
    op.drop_column("messages", "reply_to_id")
