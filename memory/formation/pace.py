"""How a model is asked: numbered batches until it shows it cannot answer them, and a refused answer
asked again alone until that shows it buys nothing.

A model that fails numbered batches several times in a row (answers that cannot be parsed back to their
exchanges: a small local model, typically) pays for each batch and then for every exchange again. From
then on it is asked one exchange per call (bar a probe now and then, below); the decision is logged
once, and `singles()` names the models so summarized for reports.

Until a model's last numbered batch parsed (a model new to this process, or one whose last batch came
back unparsed), its batches are probes: PROBE_EXCHANGES exchanges each, no more in flight than the
endpoint serves at once (PROBES_AT_ONCE at most), the other batches waiting for one to end. Batches sent
all at once to a model that cannot number its answers are all paid before the first comes back
unparsed (the test server's malformed model: 136 % of one call per exchange on the roleplay set, a
real 135M model 1.19x); a probe bounds that to one small call. Two in flight where the endpoint serves
two keep formation's pipeline summarizing the next batch as one is written (memory.formation.pipeline);
a one-slot local server would only queue the second. A model never seen to number a batch is probed only
in a pass whose probes cost at most PROBE_SHARE of asking its exchanges one a call: a few exchanges (a
small channel's import, a catch-up's tail) are asked one a call instead, as an unparsed probe would
cost them more than a tenth again. A model that has never answered a numbered batch
is asked one exchange per call after its first unparsed one, and probed again once in REPROBE_EVERY
exchanges so asked: a model that fumbled its first batch is not held to one a call for good.

Likewise a refused answer (invented, off its exchange, cut, misattributed) is asked again alone with
the stricter rule; a model whose retries came back refused several times in a row (SmolLM2-135M: 7 of
10 retries held a new invention or swap, issue 30) pays a second call per exchange for nothing. From
then on its refused answers go extractive at once, bar one retry in RETRY_PROBE_EVERY, which, kept,
lets it retry again. And a model that refused its last few answers ("I'm sorry, but I can't...") has
its refusal of a whole batch taken as each exchange's, instead of asking each exchange again alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from memory.types import ModelConfig

log = logging.getLogger(__name__)

# Batches unparsed in a row before a model that has answered one is asked one exchange per call.
UNPARSED_IN_A_ROW = 3
# Retries refused in a row before a model's refused answers go extractive at once; then one refused
# answer in this many is still retried, in case the model does better on other exchanges.
RETRIES_REFUSED_IN_A_ROW = 3
RETRY_PROBE_EVERY = 8
# Answers refused by the model itself in a row before its refusal of a whole batch is taken as each
# exchange's (no exchange asked again alone).
REFUSALS_IN_A_ROW = 3
# An unproven model's batches: this many exchanges a call, at most this many calls in flight. Two:
# the pipeline's next batch summarizes while the first is written, as it does for a proven model.
PROBE_EXCHANGES = 2
PROBES_AT_ONCE = 2
# A pass is probed only where its probes cost at most this share of asking its exchanges one a call
# (the summarizer estimates both from their tokens): a model that cannot number its answers then costs
# at most 1.1x of one call per exchange however few exchanges are asked (issue 30's promise).
PROBE_SHARE = 0.1
# Exchanges asked one per call between two probes of a model asked so.
REPROBE_EVERY = 64


def _key(cfg: ModelConfig) -> tuple[str, str | None]:
    return (cfg.model, cfg.api_base)


class BatchPace:
    """Per model endpoint: batches unparsed in a row, and whether it is now asked one at a time."""

    def __init__(self, unparsed_in_a_row: int = UNPARSED_IN_A_ROW) -> None:
        self._limit = unparsed_in_a_row
        self._unparsed: dict[tuple[str, str | None], int] = {}
        self._singles: set[tuple[str, str | None]] = set()
        self._retries_refused: dict[tuple[str, str | None], int] = {}
        self._refusals: dict[tuple[str, str | None], int] = {}
        self._not_retried: dict[tuple[str, str | None], int] = {}
        self._ever_parsed: set[tuple[str, str | None]] = set()
        self._probes: dict[tuple[str, str | None], int] = {}
        self._since_probe: dict[tuple[str, str | None], int] = {}
        # Set when a probe ends or a batch's answer changes what a waiting batch may do.
        self._changed: dict[tuple[str, str | None], asyncio.Event] = {}

    @asynccontextmanager
    async def batch_turn(
        self, cfg: ModelConfig, wanted: int, *, serves: int, probe: bool = True
    ) -> AsyncIterator[int]:
        """How many of `wanted` exchanges the next call may hold, held for the call: all of them once
        the model's last batch parsed, one while it is asked one at a time, else a probe's (one where
        a `probe` would not pay and the model never numbered a batch: see the module docstring),
        waiting while as many probes are in flight as the endpoint `serves`."""
        key = _key(cfg)
        while True:
            if key in self._singles:
                if self._since_probe[key] < REPROBE_EVERY or self._probes.get(key, 0):
                    self._since_probe[key] += wanted
                    yield 1
                    return
                self._since_probe[key] = 0
                break
            if self._unparsed.get(key) == 0:
                yield wanted
                return
            if not probe and key not in self._ever_parsed:
                yield 1
                return
            if self._probes.get(key, 0) < max(1, min(PROBES_AT_ONCE, serves)):
                break
            await self._changed.setdefault(key, asyncio.Event()).wait()
        self._probes[key] = self._probes.get(key, 0) + 1
        try:
            yield min(wanted, PROBE_EXCHANGES)
        finally:
            self._probes[key] -= 1
            self._wake(key)

    def _wake(self, key: tuple[str, str | None]) -> None:
        event = self._changed.pop(key, None)
        if event is not None:
            event.set()

    def batch_answered(self, cfg: ModelConfig, *, parsed: bool) -> None:
        """Note how a numbered batch of several exchanges came back."""
        key = _key(cfg)
        self._wake(key)
        if parsed:
            self._unparsed[key] = 0
            self._ever_parsed.add(key)
            if key in self._singles:
                self._singles.discard(key)
                log.warning("Summarizer %s answered a numbered batch again; batches resume", cfg.model)
            return
        self._unparsed[key] = self._unparsed.get(key, 0) + 1
        limit = self._limit if key in self._ever_parsed else 1
        if self._unparsed[key] >= limit and key not in self._singles:
            self._singles.add(key)
            self._since_probe[key] = 0
            log.warning(
                "Summarizer %s: %d numbered batch(es) in a row could not be parsed; asking one "
                "exchange per call from now on (a batch tried again every %d exchanges)",
                cfg.model,
                limit,
                REPROBE_EVERY,
            )

    def singles(self) -> list[str]:
        """The models asked one exchange per call."""
        return sorted(model for model, _ in self._singles)

    def retry_worth_it(self, cfg: ModelConfig) -> bool:
        """Whether a refused answer of this model is asked again (see the module docstring)."""
        key = _key(cfg)
        if self._retries_refused.get(key, 0) < RETRIES_REFUSED_IN_A_ROW:
            return True
        self._not_retried[key] = self._not_retried.get(key, 0) + 1
        return self._not_retried[key] % RETRY_PROBE_EVERY == 0

    def answered(self, cfg: ModelConfig, *, refused: bool) -> None:
        """Note whether the model refused an answer (a refusal of a whole batch counts once)."""
        key = _key(cfg)
        self._refusals[key] = self._refusals.get(key, 0) + 1 if refused else 0

    def refuses(self, cfg: ModelConfig) -> bool:
        """Whether the model refused its last REFUSALS_IN_A_ROW answers."""
        return self._refusals.get(_key(cfg), 0) >= REFUSALS_IN_A_ROW

    def retries_in_doubt(self, cfg: ModelConfig) -> bool:
        """Whether this model's last retry was refused: its next ones are better asked one by one."""
        return self._retries_refused.get(_key(cfg), 0) > 0

    def retried(self, cfg: ModelConfig, *, kept: bool) -> None:
        """Note whether a retry's answer was kept."""
        key = _key(cfg)
        if kept:
            self._retries_refused[key] = 0
            return
        self._retries_refused[key] = self._retries_refused.get(key, 0) + 1
        if self._retries_refused[key] == RETRIES_REFUSED_IN_A_ROW:
            log.warning(
                "Summarizer %s: %d retries in a row refused; its refused answers go extractive at once "
                "from now on (one in %d still retried)",
                cfg.model,
                RETRIES_REFUSED_IN_A_ROW,
                RETRY_PROBE_EVERY,
            )
