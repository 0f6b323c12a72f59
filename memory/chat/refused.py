"""Messages the bot refused (over the flood limit) are stored like any message, before anything acts on
them, and marked refused (`MissedMessageLog.refuse`). Stored, catch-up passes them over instead of
taking them for missed ones (and answering them minutes later), reading on from the newest message the
bot acted on, not from a refused one (memory.chat.missed); marked, they are never part of a memory,
nor of its context, nor of what the personality reads (its prompt, its rolling summary): it never heard
them."""

from __future__ import annotations

from sqlalchemy import ColumnElement

from models import Message

# messages.memory_excluded of a message the bot refused.
REFUSED = "refused"


def not_refused() -> ColumnElement[bool]:
    """The filter that leaves refused messages out of what the personality reads."""
    return Message.memory_excluded.is_distinct_from(REFUSED)
