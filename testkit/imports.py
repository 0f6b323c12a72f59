"""Transcripts imported as personae imports them (the runtime's transfer service, as the CLI calls it):
JSONL transcripts and SillyTavern chats."""

from __future__ import annotations

from bot.runtime import Runtime
from memory.transfer.service import ImportReport
from memory.transfer.sillytavern import parse_sillytavern
from memory.transfer.transcript import parse_transcript
from models import Personality


async def import_text(runtime: Runtime, personality: Personality, text: str) -> ImportReport:
    """The JSONL transcript imported to this personality, its lines naming their users."""
    lines, skipped = parse_transcript(text)
    return await runtime.transfer.import_transcript(
        lines, personality=personality, default_user_id=None, skipped_lines=skipped
    )


async def import_chat(runtime: Runtime, personality: Personality, text: str) -> ImportReport:
    """The chat imported as user 555's, as `personae import --format sillytavern` imports it."""
    chat = parse_sillytavern(text)
    return await runtime.transfer.import_kept_chat(
        chat.lines, personality=personality, default_user_id="555", skipped_lines=chat.skipped
    )
