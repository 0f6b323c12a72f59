"""A memory as recall reads it from Postgres (`StoredMemory`, the columns `STORED_COLUMNS`) and as it
returns it (`RecalledMemory`: with its score and its context); memory ids as one array (`ID_ARRAY`)."""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.dialects.postgresql import ARRAY, UUID

from models import Memory


@dataclass(frozen=True, slots=True)
class StoredMemory:
    """A memory as recall reads it from Postgres: what it returns, and what places it in its thread."""

    id: uuid.UUID
    content: str
    content_verbatim: str | None
    source_message_ids: list[str]
    occurred_at: datetime
    summarized: bool
    summarizer: str
    pinned: bool
    conversation_id: int | None
    times_said: int
    repeat_of: uuid.UUID | None
    edited_at: datetime | None  # corrected by its user: it no longer says what its messages say


# Only these columns are read, as plain rows: measured faster than whole ORM entities (about 2 ms a
# recall for a typical user, 5 for one with 5,000 memories, at 30,000 memories).
STORED_COLUMNS = tuple(getattr(Memory, field.name) for field in dataclasses.fields(StoredMemory))
# Memory ids as one array parameter: one statement (prepared once) whatever their number.
ID_ARRAY = ARRAY(UUID(as_uuid=True))


@dataclass(frozen=True, slots=True)
class RecalledMemory(StoredMemory):
    """A memory recalled: as read (its own text, messages and id), with its score, and the memories
    said just before and after it in its conversation that came with it (`context`, conversation
    order). What is shown beside its id is its own text; a prompt reads it with its context
    (`text_with_context`). Its score is the fused one (`fuse`, in [0, 1]) plus the bonuses of
    memory.recall.relevance (the kind of answer asked for, the noun asked about)."""

    score: float
    context: tuple[StoredMemory, ...] = ()
    pinned_first: bool = False  # recalled first for being pinned (`pins_first`), not for its rank

    @property
    def text_with_context(self) -> str:
        """Its own words first, then those of its context, a memory a line."""
        return "\n".join([self.content, *(m.content for m in self.context)])

    @property
    def sources_with_context(self) -> list[str]:
        """The messages of its own text, then those of its context."""
        return [*self.source_message_ids, *(s for m in self.context for s in m.source_message_ids)]
