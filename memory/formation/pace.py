"""How many exchanges a model is asked at once: numbered batches, until it shows it cannot answer them.

A model that fails numbered batches several times in a row (answers that cannot be parsed back to their
exchanges: a small local model, typically) pays for each batch and then for every exchange again. From
then on it is asked one exchange per call, for as long as this process runs; the decision is logged
once, and `singles()` names the models so summarized for reports.
"""

from __future__ import annotations

import logging

from memory.types import ModelConfig

log = logging.getLogger(__name__)

# Batches unparsed in a row before a model is asked one exchange per call.
UNPARSED_IN_A_ROW = 3


def _key(cfg: ModelConfig) -> tuple[str, str | None]:
    return (cfg.model, cfg.api_base)


class BatchPace:
    """Per model endpoint: batches unparsed in a row, and whether it is now asked one at a time."""

    def __init__(self, unparsed_in_a_row: int = UNPARSED_IN_A_ROW) -> None:
        self._limit = unparsed_in_a_row
        self._unparsed: dict[tuple[str, str | None], int] = {}
        self._singles: set[tuple[str, str | None]] = set()

    def batch_size(self, cfg: ModelConfig, wanted: int) -> int:
        """How many exchanges one call to this model may hold."""
        return 1 if _key(cfg) in self._singles else wanted

    def batch_answered(self, cfg: ModelConfig, *, parsed: bool) -> None:
        """Note how a numbered batch of several exchanges came back."""
        key = _key(cfg)
        if parsed:
            self._unparsed[key] = 0
            return
        self._unparsed[key] = self._unparsed.get(key, 0) + 1
        if self._unparsed[key] >= self._limit and key not in self._singles:
            self._singles.add(key)
            log.warning(
                "Summarizer %s: %d numbered batches in a row could not be parsed; asking one exchange "
                "per call from now on",
                cfg.model,
                self._limit,
            )

    def singles(self) -> list[str]:
        """The models asked one exchange per call."""
        return sorted(model for model, _ in self._singles)
