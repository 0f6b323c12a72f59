"""Conversation keys name the guild: a guild line without a channel is no longer keyed as a DM.

Until now a guild line that named no channel was keyed `dm:{user}`, like the user's DMs, so a DM
imported after it joined that guild conversation (and its memories took the guild), and two guilds
reusing a channel id shared `ch:{channel}`. Keys are now `dm:{user}`, `g:{guild}:u:{user}` and
`ch:{guild}:{channel}` (memory.conversations.Venue.key); existing conversations get theirs. Messages
already filed together cannot be told apart again: the rows keep them.

Revision ID: 0006_i20_venue_keys
Revises: 0005_i18_summary_fallback
Create Date: 2026-11-23 10:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0006_i20_venue_keys"
down_revision: str | None = "0005_i18_summary_fallback"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "UPDATE conversations SET venue_key = 'ch:' || guild_id || ':' || channel_id "
        "WHERE venue_key = 'ch:' || channel_id AND guild_id IS NOT NULL"
    )
    op.execute(
        "UPDATE conversations SET venue_key = 'g:' || guild_id || ':u:' || substr(venue_key, 4) "
        "WHERE venue_key LIKE 'dm:%' AND guild_id IS NOT NULL"
    )


def downgrade() -> None:
    # Where two guilds' conversations would take one old key, the later ones keep the new key.
    op.execute(
        "UPDATE conversations AS c SET venue_key = 'ch:' || c.channel_id "
        "WHERE c.venue_key = 'ch:' || c.guild_id || ':' || c.channel_id "
        "AND c.id = (SELECT min(o.id) FROM conversations AS o WHERE o.personality_id = c.personality_id "
        "AND o.channel_id = c.channel_id AND o.venue_key LIKE 'ch:%')"
    )
    op.execute(
        "UPDATE conversations AS c SET venue_key = 'dm:' || substr(c.venue_key, length(c.guild_id) + 6) "
        "WHERE c.venue_key = 'g:' || c.guild_id || ':u:' || substr(c.venue_key, length(c.guild_id) + 6) "
        "AND NOT EXISTS (SELECT 1 FROM conversations AS o WHERE o.personality_id = c.personality_id "
        "AND o.venue_key = 'dm:' || substr(c.venue_key, length(c.guild_id) + 6))"
    )
