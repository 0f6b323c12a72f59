"""Import a JSONL transcript into the message log, then form its memories.

The file is read, checked, stored and committed a chunk of lines at a time (CHUNK_LINES), and each
chunk's memories are formed before the next is read: the memory an import takes stays flat however
long the file (what later lines need of earlier ones is read back from the log), and an import
stopped (a signal, a malformed line, the model down) keeps every chunk before the one it was in. A
message is known by its `id` in its conversation, so importing the same file again stores nothing new
and forms no new memory, only what is still pending: run again, a stopped import resumes where it
stopped. An id the log holds for another message (another author, other words, another message
answered) is refused with its line, never taken for it.

Each line goes to the personality it names (`personality`: an export of several personalities
imports back to each its own), else to the one the import is for; naming one for the whole import
files every line there, refused when the file names several. A reply (`"role": "assistant"`)
answers the user line its `reply_to` names, else the nearest user line before it in the same venue
(the channel and guild the reply names; any, when it names none), and is filed in that line's venue.
In a channel where several users talk at once, only `reply_to` says who was answered: without it,
each reply goes to whoever spoke last.

A chat that is the whole of a conversation as the user kept it (a SillyTavern chat, whose user may
have kept another swipe of a reply, or edited or deleted a line, since the last import) is imported with
`replace_edited`, in one chunk: what the log holds of it that the chat no longer does is replaced,
and those exchanges' memories formed anew (memory.transfer.kept_chat).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import islice

from sqlalchemy import func, select, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.errors import InvalidInputError, UserFacingError
from memory.formation.forming import FormationReport, MemoryFormation
from memory.llm import LLMUnavailableError
from memory.transfer.filing import Filing
from memory.transfer.transcript import Transcript, TranscriptLine
from memory.types import MemoryMode, MessageRole
from models import Message, Personality

# Lines read, checked, stored and committed at a time, then remembered before the next are read: an
# interrupted import keeps every chunk before it. Each chunk's formation ends in a drain (its last
# batches written while none is summarized: ~1 s against a busy provider, pipeline.CLAIM_SECONDS);
# 2,000 lines, 1,000 exchanges, are ~13 s of summarizing at 77 exchanges/s, so the drain costs about
# what a claim's already does, and a stop loses at most that (a verbatim import's chunk, ~1 s of its
# 1,000,000 lines in 7 minutes).
CHUNK_LINES = 2000
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
    """Stores an import's lines in the message log and forms their memories, a chunk at a time."""

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession], formation: MemoryFormation) -> None:
        self._sessionmaker = sessionmaker
        self._formation = formation

    async def import_lines(
        self,
        lines: Iterable[TranscriptLine],
        *,
        personality: Personality | None = None,
        default_user_id: str | None,
        skipped_lines: int = 0,
        mode: MemoryMode | None = None,
        progress: ProgressFactory | None = None,
        replace_edited: bool = False,
    ) -> ImportReport:
        """Store the lines as messages, then form their exchanges' memories, a chunk at a time (each
        committed on its own: see the module docstring).

        `personality` takes every line; without it, each line goes to the personality it names.

        replace_edited: the lines are the whole conversation as its user kept it (see the module
        docstring), so what the log holds of it that they no longer do is replaced; they are stored as
        one chunk, every reply to a line beside it."""
        filing = Filing(default_user_id, replace_edited=replace_edited)
        if personality is not None:
            filing.import_all_into(personality.id, personality.name)
        chunks = iter(lines)
        read = new = analyzed = 0
        report = FormationReport()
        while True:
            try:
                async with self._sessionmaker.begin() as session:
                    chunk = list(islice(chunks, None if replace_edited else CHUNK_LINES))
                    stored = await filing.store(session, chunk) if chunk else 0
                    expected = await _exchanges_to_form(session, sorted(filing.touched)) if stored else 0
            except InvalidInputError as exc:
                if not read:
                    raise
                raise InvalidInputError(
                    f"{exc}. The {read} lines before its chunk are stored and remembered: fix it and run "
                    "the same import again: it adds the rest"
                ) from None
            if not chunk:
                break
            read, new = read + len(chunk), new + stored
            await self._formation.store.drop_points(filing.forgotten)
            filing.forgotten.clear()
            if new - analyzed >= ANALYZE_AFTER:
                analyzed = new
                await self._analyze_log()
            report.add(await self._form(filing.touched, stored, new, mode, progress, expected))
        if isinstance(lines, Transcript):  # its skipped lines are known once it is read
            skipped_lines += len(lines.skipped)
        return ImportReport(
            messages_read=read,
            messages_new=new,
            skipped_lines=skipped_lines,
            exchanges=report.exchanges,
            formation=report,
        )

    async def _form(
        self,
        conversation_ids: Iterable[int],
        stored: int,
        new: int,
        mode: MemoryMode | None,
        progress: ProgressFactory | None,
        expected: int,
    ) -> FormationReport:
        """Form what is pending in the conversations a chunk was stored in."""
        report = FormationReport()
        step = progress(expected) if progress is not None and stored else None
        try:
            for conversation_id in sorted(conversation_ids):
                report.add(
                    await self._formation.form_pending(
                        conversation_id=conversation_id, mode_override=mode, progress=step
                    )
                )
        except LLMUnavailableError as exc:
            raise ImportIncompleteError(
                f"{new} new messages stored, but forming their memories failed: {exc}. They wait in the "
                "log: run the same import again (or `personae worker`) once the model answers."
            ) from exc
        return report

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
