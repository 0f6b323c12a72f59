"""What the tests read back: a user's memories as their export (`/memory export`) carries them."""

from __future__ import annotations

import json
from typing import Any

from memory.transfer.export import MemoryExport


async def remembered(export: MemoryExport, user_id: str) -> list[dict[str, Any]]:
    """The memory records of the user's JSONL export, oldest first."""
    records = [json.loads(line) for line in await export.export_lines(user_id=user_id)]
    return [record["memory"] for record in records if "memory" in record]
