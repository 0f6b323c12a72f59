"""A memory that cannot be indexed is set aside (issue 33): state 'set_aside'.

One bad row (a date the driver reads back naive, a point the index refuses) is marked and counted in
`memory stats`, `reindex --check` and `db status`, instead of stopping formation, the worker and
`reindex` for every personality. `personae reindex` tries such rows again.

Revision ID: 0009_i33_poison
Revises: 0008_i31_supersession
Create Date: 2026-11-27 15:30:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0009_i33_poison"
down_revision: str | None = "0008_i31_supersession"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_constraint(op.f("ck_memories_state"), "memories", type_="check")
    op.create_check_constraint(
        op.f("ck_memories_state"), "memories", "state IN ('formed', 'indexed', 'deleted', 'set_aside')"
    )


def downgrade() -> None:
    # A set-aside memory goes back to 'formed': the next formation tries to index it again.
    op.execute("UPDATE memories SET state = 'formed' WHERE state = 'set_aside'")
    op.drop_constraint(op.f("ck_memories_state"), "memories", type_="check")
    op.create_check_constraint(op.f("ck_memories_state"), "memories", "state IN ('formed', 'indexed', 'deleted')")
