"""How many calls one LLM provider gets at once: a limit that finds its own level, like TCP's window.

Each provider endpoint has an `AdaptiveLimit`. It starts low and grows while calls succeed with the
limit in full use: by one per success ("slow start", doubling per round of calls) up to the last level
known to be safe, then by one per round or slower, probing. A refusal (429, 503, 529) or a timeout
at or below that level halves it, once per round of calls, however many calls of that round fail.
The refused call is retried by the retry policy after the provider's Retry-After, outside the
limit: nothing is lost or counted twice here, the limit only decides when a call may start. A
retried call starts before the calls that have not started yet (`acquire(retry=True)`).

What it remembers keeps it near a provider's real limit without hammering it: after a halving it
grows fast back to just below the level that was refused, and each refusal at about the same level
again doubles the time before the next probe above it. A refused probe above that level is not
congestion but the answer it asked for: the limit falls back to the calls the provider was taking
when it refused (one refused call per probe, retried after its Retry-After), not to half of them. A
provider that queues instead of refusing (a local Ollama serving one request at a time) shows itself
by latency: a call taking more than twice the fastest call seen lately ends the fast climb, and
growth stops while even the fastest of the last few calls is that slow, so such a queue stays short.

No maintained library fits: aiolimiter and its kin bound a rate (calls per period), not calls in
flight, and the adaptive-concurrency packages on PyPI are single-release projects.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import time
from collections import deque
from dataclasses import dataclass

log = logging.getLogger(__name__)

# Growth stops while the fastest of the recent calls is this many times slower than the fastest call
# seen lately: calls are waiting in the provider's queue, and more of them would only wait longer.
QUEUEING_FACTOR = 2.0
_RECENT_SAMPLES = 6
_BASE_WINDOW = 1024  # successes per window of the "fastest seen lately" baseline (two windows kept)
_MAX_PROBE_ROUNDS = 32
_LOG_CHANGE = 0.25  # the level is logged when it moved by this share, at most every _LOG_GAP s,
_LOG_GAP = 5.0
_LOG_PERIOD = 60.0  # or when it moved at all, at most every _LOG_PERIOD s


@dataclass(frozen=True, slots=True)
class LimitStats:
    """A snapshot of one limit, for logs and benchmarks."""

    name: str
    level: int
    ceiling: int
    peak_level: int
    peak_in_flight: int
    successes: int
    congestion_signals: int  # refusals and timeouts seen, including those of a round already cut
    decreases: int


class Slot:
    """One call's place in the limit; report how the call went, then release it."""

    __slots__ = ("_done", "_generation", "_limit", "_number", "_released", "_started")

    def __init__(self, limit: AdaptiveLimit, generation: int, number: int) -> None:
        self._limit = limit
        self._generation = generation
        self._number = number  # calls are numbered in the order they start
        self._started = time.monotonic()
        self._done = False
        self._released = False

    def succeeded(self, *, sample_latency: bool = True) -> None:
        """The provider accepted and answered the call (a stream: its first text arrived)."""
        if not self._done:
            self._done = True
            latency = time.monotonic() - self._started if sample_latency else None
            self._limit._on_success(latency)

    def congested(self, reason: str) -> None:
        """The provider refused the call as overloaded (429, 503) or it timed out."""
        if not self._done:
            self._done = True
            self._limit._on_congestion(self._generation, self._number, reason)

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._limit._release(self._number)


class AdaptiveLimit:
    """An asyncio concurrency limit for one provider that grows on success and halves on refusal."""

    def __init__(
        self,
        name: str,
        *,
        ceiling: int,
        initial: int = 4,
    ) -> None:
        if ceiling < 1:
            raise ValueError("the ceiling must be at least 1")
        self.name = name
        self.ceiling = ceiling
        self._limit = float(max(1, min(initial, ceiling)))
        self._safe = float(ceiling)  # grow fast below this level, slowly above it
        self._refused_at: float | None = None  # the level refused last, as far as known
        self._probe_rounds = 1  # rounds of calls per +1 above the safe level
        self._generation = 0  # bumped by each decrease: one cut per round of calls
        self._in_flight = 0
        self._numbers = itertools.count()
        self._accepted: set[int] = set()  # numbers of the calls in flight not refused
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._recent: deque[float] = deque(maxlen=_RECENT_SAMPLES)
        self._base_previous = math.inf
        self._base_current = math.inf
        self._base_count = 0
        self._peak_level = int(self._limit)
        self._peak_in_flight = 0
        self._successes = 0
        self._signals = 0
        self._decreases = 0
        self._logged_level = int(self._limit)
        self._logged_at = -math.inf  # the first change is logged at once
        self._log_reason = ""
        self._log_timer: asyncio.TimerHandle | None = None
        self._log_loop: asyncio.AbstractEventLoop | None = None

    @property
    def level(self) -> int:
        """How many calls may be in flight now."""
        return int(self._limit)

    def stats(self) -> LimitStats:
        return LimitStats(
            self.name,
            self.level,
            self.ceiling,
            self._peak_level,
            self._peak_in_flight,
            self._successes,
            self._signals,
            self._decreases,
        )

    async def acquire(self, *, retry: bool = False) -> Slot:
        """Wait (first come, first served) for a free place under the current level.

        A `retry` (a call refused or failed before, back after its wait) goes ahead of the calls not
        yet started: it had its turn already, and what waits on it (a batch of summaries is written
        once all are done) would otherwise wait behind every call queued since, while the provider
        idles once those are done (bench.ingest against a server allowing 8: a refused summary
        retried after 1 s waited ~3 s more behind two batches, and in-flight calls fell to 4).
        """
        if self._waiters or self._in_flight >= self.level:
            waiter = asyncio.get_running_loop().create_future()
            if retry:
                self._waiters.appendleft(waiter)
            else:
                self._waiters.append(waiter)
            try:
                await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    self._release(None)  # woken, then cancelled: hand the place on
                elif waiter in self._waiters:
                    self._waiters.remove(waiter)
                raise
        else:
            self._in_flight += 1
        self._peak_in_flight = max(self._peak_in_flight, self._in_flight)
        number = next(self._numbers)
        self._accepted.add(number)
        return Slot(self, self._generation, number)

    def _release(self, number: int | None) -> None:
        if number is not None:
            self._accepted.discard(number)
        self._in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self._in_flight < self.level:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self._in_flight += 1  # the place is taken on the waiter's behalf
                waiter.set_result(None)

    def _on_success(self, latency: float | None) -> None:
        self._successes += 1
        slow, queueing = self._sample(latency) if latency is not None else (False, False)
        # Grow only when the limit is what holds calls back, and the provider is not queueing them.
        saturated = bool(self._waiters) or self._in_flight >= self.level
        if not saturated or queueing or self._limit >= self.ceiling:
            return
        if slow and self._limit < self._safe:
            self._safe = self._limit  # a slow call ends the fast climb (as HyStart does in TCP)
            return
        if self._limit < self._safe:
            self._limit = min(self._limit + 1, self._safe)
        else:
            self._limit += 1 / (self._limit * self._probe_rounds)
            if self._refused_at is not None and self._limit >= self._refused_at + 1:
                self._probe_rounds = 1  # past the old refusal without one: the provider has room
        self._limit = min(self._limit, float(self.ceiling))
        self._peak_level = max(self._peak_level, self.level)
        self._note_level("calls succeeding")
        self._wake()

    def _sample(self, latency: float) -> tuple[bool, bool]:
        """Record a latency: whether this call was slow, and whether the recent calls look queued."""
        self._recent.append(latency)
        self._base_current = min(self._base_current, latency)
        self._base_count += 1
        if self._base_count >= _BASE_WINDOW:
            self._base_previous, self._base_current, self._base_count = self._base_current, math.inf, 0
        slow = QUEUEING_FACTOR * min(self._base_previous, self._base_current)
        return latency > slow, min(self._recent) > slow

    def _on_congestion(self, generation: int, number: int, reason: str) -> None:
        self._signals += 1
        # Refusals come back at once: the calls started before the refused one and still in flight
        # were accepted. That many at once is what the provider takes now.
        self._accepted.discard(number)
        below = max(1.0, float(sum(1 for other in self._accepted if other < number)))
        if generation != self._generation:
            self._safe = min(self._safe, below)  # the round was cut already: one halving per round
            return
        level = self._limit
        probing = level > self._safe  # above the last level the provider was known to take
        if self._refused_at is not None and level <= self._refused_at + 1.5:
            self._probe_rounds = min(self._probe_rounds * 2, _MAX_PROBE_ROUNDS)
        self._safe = min(below, max(1.0, level - 1))
        self._refused_at = self._safe + 1
        # A probe refused falls back to what the provider took at that moment (as BBR's probing does):
        # halving there would idle half its capacity for a refusal the probe was meant to find. A
        # refusal at a level taken before says the provider takes less now: halve, as TCP does.
        self._limit = self._safe if probing else max(1.0, level / 2)
        self._generation += 1
        self._decreases += 1
        self._recent.clear()
        self._note_level(reason)

    def _note_level(self, reason: str) -> None:
        """Log the level when it settles: a line per large move at most every few seconds, not per call."""
        self._log_reason = reason
        loop = asyncio.get_running_loop()
        if self._log_timer is not None and self._log_loop is loop:
            return  # a line is due already
        self._log_loop = loop
        delay = max(0.0, self._logged_at + _LOG_GAP - time.monotonic())
        self._log_timer = loop.call_later(delay, self._flush_log)

    def _flush_log(self) -> None:
        self._log_timer = None
        level, now = self.level, time.monotonic()
        moved = abs(level - self._logged_level)
        if moved == 0:
            return
        since = now - self._logged_at
        if moved < max(1.0, _LOG_CHANGE * self._logged_level) and since < _LOG_PERIOD:
            self._log_timer = asyncio.get_running_loop().call_later(_LOG_PERIOD - since, self._flush_log)
            return
        log.info(
            "LLM concurrency for %s: %d calls in flight (was %d, ceiling %d; last change: %s)",
            self.name,
            level,
            self._logged_level,
            self.ceiling,
            self._log_reason,
        )
        self._logged_level, self._logged_at = level, now
