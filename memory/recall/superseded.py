"""A superseded memory's mark, as listings and receipts show it: since when, and by what.

A correction or a forgetting supersedes the memories that state the claim it took back
(memory.formation.forgotten): they are kept, for export and audit, and never recalled again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from models import Memory


@dataclass(frozen=True, slots=True)
class Superseded:
    """When the memory was superseded, and the correction's words (None: the claim was forgotten)."""

    at: datetime
    correction: str | None

    def describe(self) -> str:
        """`superseded 2026-11-27 by "My horse is called Bramble."`, or `... (forgotten)`."""
        by = f'by "{" ".join(self.correction.split())}"' if self.correction else "(forgotten)"
        return f"superseded {self.at:%Y-%m-%d} {by}"


def superseded(memory: Memory, correction: str | None) -> Superseded | None:
    """The memory's mark, None when it is not superseded."""
    if memory.superseded_at is None:
        return None
    return Superseded(memory.superseded_at, correction)
