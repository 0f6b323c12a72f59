"""What the tests read back: a user's memories as their export (`/memory export`) carries them."""

from __future__ import annotations

import json
from typing import Any

from memory.owners.user_settings import UserSettingsService


async def remembered(user_settings: UserSettingsService, user_id: str) -> list[dict[str, Any]]:
    """The memory records of the user's JSONL export, oldest first."""
    records = [json.loads(line) for line in await user_settings.export_lines(user_id=user_id)]
    return [record["memory"] for record in records if "memory" in record]
