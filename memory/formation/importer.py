"""Import a JSONL transcript into the message log, then form its memories.

The file is read, checked and stored a batch of lines at a time, all in one transaction: a malformed
line anywhere leaves nothing behind, and the memory an import takes stays flat however long the file
(what later lines need of earlier ones is read back from the log). A message is known by its `id` in
its conversation, so importing the same file again stores nothing new and forms no new memory; an id
the log holds for another message (another author, other words, another message answered) is
refused with its line, never taken for it.

Each line goes to the personality it names (`personality`: an export of several personalities
imports back to each its own), else to the one the import is for; naming one for the whole import
files every line there, refused when the file names several. A reply (`"role": "assistant"`)
answers the user line its `reply_to` names, else the nearest user line before it in the same venue
(the channel and guild the reply names; any, when it names none), and is filed in that line's venue.
In a channel where several users talk at once, only `reply_to` says who was answered: without it,
each reply goes to whoever spoke last.

A chat that is the whole of a conversation as the user kept it (a SillyTavern chat, whose user may
have kept another swipe of a reply since the last import) is imported with `replace_edited`: a stored
reply to a user line whose replies in the file are others is replaced by them, and that exchange's
memory is formed anew.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import islice

from sqlalchemy import func, select, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.errors import UserFacingError
from memory.formation.forming import FormationReport, MemoryFormation
from memory.formation.import_filing import Filing
from memory.formation.transcript import (
    BYTE_ORDER_MARK,
    MAX_CONTENT_CHARS,
    MAX_ID_CHARS,
    MAX_TRANSCRIPT_BYTES,
    REQUIRED_FIELDS,
    SkippedLine,
    Transcript,
    TranscriptLine,
    json_object,
    jsonl_lines,
    line_error,
    open_transcript,
    parse_transcript,
    parse_transcript_lines,
    read_transcript,
    read_transcript_text,
    transcript_file_lines,
)
from memory.llm import LLMUnavailableError
from memory.types import MemoryMode, MessageRole
from models import Message, Personality

# The transcript's reading lives in memory.formation.transcript; its names are imported from here too.
__all__ = [
    "BYTE_ORDER_MARK",
    "MAX_CONTENT_CHARS",
    "MAX_ID_CHARS",
    "MAX_TRANSCRIPT_BYTES",
    "REQUIRED_FIELDS",
    "ImportIncompleteError",
    "ImportReport",
    "SkippedLine",
    "Transcript",
    "TranscriptImporter",
    "TranscriptLine",
    "json_object",
    "jsonl_lines",
    "line_error",
    "open_transcript",
    "parse_transcript",
    "parse_transcript_lines",
    "read_transcript",
    "read_transcript_text",
    "transcript_file_lines",
]

# Lines read, checked and stored at a time.
BATCH_LINES = 2000
# New messages from which an import refreshes the log's statistics before forming (_analyze_log).
ANALYZE_AFTER = 5000
ProgressFactory = Callable[[int], Callable[[int], None]]

log = logging.getLogger(__name__)


@dataclass
class ImportReport:
    messages_read: int
    messages_new: int
    skipped_lines: int
    exchanges: int
    formation: FormationReport


class ImportIncompleteError(UserFacingError):
    """The messages were stored, but forming their memories failed: they wait in the log."""


class TranscriptImporter:
    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession], memory: MemoryFormation) -> None:
        self._sessionmaker = sessionmaker
        self._memory = memory

    async def import_lines(
        self,
        lines: Iterable[TranscriptLine],
        *,
        personality_id: int | None = None,
        personality_user_id: str | None = None,
        default_user_id: str | None,
        skipped_lines: int = 0,
        mode: MemoryMode | None = None,
        progress: ProgressFactory | None = None,
        replace_edited: bool = False,
    ) -> ImportReport:
        """Store the lines as messages (atomically, a batch at a time), then form their exchanges'
        memories. `personality_id` (its messages' author `personality_user_id`) takes every line;
        without it, each line goes to the personality it names.

        replace_edited: the lines are the whole conversation as its user kept it (see the module
        docstring), so a stored reply they no longer hold is replaced by the one they do; they are
        stored as one batch, every reply to a line beside it."""
        read = new = 0
        async with self._sessionmaker.begin() as session:
            filing = Filing(session, default_user_id, replace_edited=replace_edited)
            if personality_id is not None:
                if personality_user_id is None:
                    name = await session.scalar(
                        select(Personality.name).where(Personality.id == personality_id)
                    )
                    personality_user_id = f"personality:{name}"
                filing.import_all_into(personality_id, personality_user_id)
            batches = iter(lines)
            while batch := list(islice(batches, None if replace_edited else BATCH_LINES)):
                read += len(batch)
                new += await filing.store(batch)
            conversation_ids = filing.conversation_ids
            expected = await _exchanges_to_form(session, conversation_ids) if new else 0
        await self._memory.store.drop_points(filing.forgotten)
        if new >= ANALYZE_AFTER:
            await self._analyze_log()
        if isinstance(lines, Transcript):  # its skipped lines are known once it is read
            skipped_lines += len(lines.skipped)
        report = FormationReport()
        step = progress(expected) if progress is not None and new else None
        try:
            for conversation_id in conversation_ids:
                report.add(
                    await self._memory.form_pending(
                        conversation_id=conversation_id, mode_override=mode, progress=step
                    )
                )
        except LLMUnavailableError as exc:
            raise ImportIncompleteError(
                f"{new} new messages stored, but forming their memories failed: {exc}. They wait in the "
                "log: run the same import again (or `personae worker`) once the model answers."
            ) from exc
        return ImportReport(
            messages_read=read,
            messages_new=new,
            skipped_lines=skipped_lines,
            exchanges=report.exchanges,
            formation=report,
        )

    async def _analyze_log(self) -> None:
        """Refresh the planner's statistics of the log, so that formation's queries use its indexes.

        Until autovacuum comes round (a minute or more), PostgreSQL plans for the log as it was before
        the import: for a log that was small, it scans the whole table for every exchange's context.
        """
        try:
            async with self._sessionmaker.begin() as session:
                await session.execute(text("ANALYZE messages"))
        except DBAPIError:  # not the table's owner, say: autovacuum will, later
            log.warning(
                "Could not ANALYZE messages after an import; formation may start slowly", exc_info=True
            )


async def _exchanges_to_form(session: AsyncSession, conversation_ids: list[int]) -> int:
    """The messages answered and not yet remembered in these conversations: each is an exchange."""
    return int(
        await session.scalar(
            select(func.count(func.distinct(Message.reply_to_id))).where(
                Message.conversation_id.in_(conversation_ids),
                Message.role == MessageRole.ASSISTANT.value,
                Message.memory_processed_at.is_(None),
            )
        )
        or 0
    )
