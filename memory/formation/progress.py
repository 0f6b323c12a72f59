"""Progress told per exchange formed, and counted: a batch's summarized exchanges move the bar as their
calls settle them (a slow local model shows life within one call), the rest when the batch is written."""

from __future__ import annotations

from dataclasses import dataclass

from memory.types import ProgressCallback


@dataclass
class CountedProgress:
    """A progress callback (or none) that counts the exchanges it was told of."""

    progress: ProgressCallback | None
    count: int = 0

    def __call__(self, exchanges: int) -> None:
        self.count += exchanges
        if self.progress is not None:
            self.progress(exchanges)
