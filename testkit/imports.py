"""Transcripts imported as personae imports them (the runtime's importer, as the CLI calls it): JSONL
transcripts and SillyTavern chats."""

from __future__ import annotations

from bot.runtime import Runtime
from memory.formation.importer import ImportReport, parse_transcript
from memory.formation.sillytavern import parse_sillytavern
from models import Personality


async def import_text(runtime: Runtime, personality: Personality, text: str) -> ImportReport:
    """The JSONL transcript imported to this personality, its lines naming their users."""
    lines, skipped = parse_transcript(text)
    return await runtime.importer.import_lines(
        lines,
        personality_id=personality.id,
        personality_user_id=f"personality:{personality.name}",
        default_user_id=None,
        skipped_lines=skipped,
    )


async def import_chat(runtime: Runtime, personality: Personality, text: str) -> ImportReport:
    """The chat imported as user 555's, as `personae import --format sillytavern` imports it."""
    chat = parse_sillytavern(text)
    return await runtime.importer.import_lines(
        chat.lines,
        personality_id=personality.id,
        personality_user_id=f"personality:{personality.name}",
        default_user_id="555",
        skipped_lines=chat.skipped,
        replace_edited=True,
    )
