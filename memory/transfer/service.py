"""Import and export's one door: what `personae import`, `/memory export`, `personae memory export`, the
demo and the benches call.

It decides what callers used to: who an imported reply is said by (its personality, as the chat stores
its own replies) and when an import replaces what the log holds (a chat as its user keeps it, whose
edited lines and other swipes replace the old ones; a transcript, whose lines only add). The export
half reads PostgreSQL only, so the commands that open no index have it too (`MemoryExport`, the Core's
`transfer`); the whole service forms memories, so it is built over formation (memory.wiring).
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.formation.forming import MemoryFormation
from memory.transfer.export import MemoryExport
from memory.transfer.importer import ImportIncompleteError, ImportReport, ProgressFactory, TranscriptImporter
from memory.transfer.transcript import TranscriptLine
from memory.types import MemoryMode
from models import Personality

__all__ = ["ImportIncompleteError", "ImportReport", "MemoryExport", "TransferService"]


class TransferService(MemoryExport):
    """Imports transcripts and kept chats (their messages stored, their memories formed) and exports a
    user's memories."""

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession], formation: MemoryFormation) -> None:
        super().__init__(sessionmaker)
        self._importer = TranscriptImporter(sessionmaker, formation)

    async def import_transcript(
        self,
        lines: Iterable[TranscriptLine],
        *,
        personality: Personality | None = None,
        default_user_id: str | None,
        skipped_lines: int = 0,
        mode: MemoryMode | None = None,
        progress: ProgressFactory | None = None,
    ) -> ImportReport:
        """Store a transcript's lines (a Personae JSONL file, an export) and form their memories: what
        the log holds already stays, so importing again adds only what is new (memory.transfer.importer).

        personality: every line goes to it (else each to the one it names); default_user_id: the user
        of lines that name none; mode: the memory mode instead of the one in force."""
        return await self._importer.import_lines(
            lines,
            personality=personality,
            default_user_id=default_user_id,
            skipped_lines=skipped_lines,
            mode=mode,
            progress=progress,
        )

    async def import_kept_chat(
        self,
        lines: Iterable[TranscriptLine],
        *,
        personality: Personality | None = None,
        default_user_id: str | None,
        skipped_lines: int = 0,
        mode: MemoryMode | None = None,
        progress: ProgressFactory | None = None,
    ) -> ImportReport:
        """Store a chat as its user keeps it (a SillyTavern chat, memory.transfer.sillytavern) and form
        its memories: it is the whole conversation, so what the log holds of it that the chat no longer
        does (another swipe kept, a line edited or deleted) is replaced, and those exchanges' memories
        formed anew (memory.transfer.kept_chat). The arguments are import_transcript's."""
        return await self._importer.import_lines(
            lines,
            personality=personality,
            default_user_id=default_user_id,
            skipped_lines=skipped_lines,
            mode=mode,
            progress=progress,
            replace_edited=True,
        )
