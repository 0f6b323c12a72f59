"""The pipeline driver on its own (memory.formation.pipeline): how far it reads ahead, what each read
is told is in flight, the order of writes, and what an error or the claim's time limit stops. Its
stages here are plain coroutines the test releases one step at a time; no timings."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection

import pytest

from memory.formation.pipeline import BatchRead, run_pipeline


class Stages:
    """Batches 0..count-1, each marking messages 'b{n}' and 'b{n}r'; a batch's forming finishes once
    the test sets its event. Records every read (with what it was told is in flight) and write."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.next = 0
        self.formed = [asyncio.Event() for _ in range(count)]
        self.finished: list[int] = []
        self.log: list[str] = []
        self.fail_write: int | None = None

    async def read(self, in_flight: Collection[str]) -> BatchRead[int] | None:
        self.log.append(f"read {self.next} past {sorted(in_flight)}")
        if self.next == self.count:
            return None
        n, self.next = self.next, self.next + 1
        return BatchRead(frozenset({f"b{n}", f"b{n}r"}), self.form(n))

    async def form(self, n: int) -> int:
        await self.formed[n].wait()
        self.finished.append(n)
        return n

    async def write(self, n: int) -> None:
        if n == self.fail_write:
            raise RuntimeError("the write failed")
        self.log.append(f"wrote {n}")


async def until(condition: Callable[[], bool]) -> None:
    """Let the pipeline run until the condition holds (it is driven by the test's events alone)."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the pipeline never got there")


async def test_reads_two_ahead_past_the_batches_in_flight_and_writes_in_order() -> None:
    stages = Stages(4)
    run = asyncio.create_task(run_pipeline(stages.read, stages.write, ahead=2))
    await until(lambda: len(stages.log) == 2)
    assert stages.log == ["read 0 past []", "read 1 past ['b0', 'b0r']"]  # two summarizing, no more
    stages.formed[0].set()
    await until(lambda: "wrote 0" in stages.log)
    # The next batch was read (and summarizes) before the first was written.
    assert stages.log[2:] == ["read 2 past ['b0', 'b0r', 'b1', 'b1r']", "wrote 0"]
    stages.formed[2].set()  # the third finishes first: it still waits for the second's write
    for _ in range(20):
        await asyncio.sleep(0)
    assert stages.log[-1] == "wrote 0"
    stages.formed[1].set()
    stages.formed[3].set()
    assert await run == 4
    assert stages.log[4:] == [
        "read 3 past ['b1', 'b1r', 'b2', 'b2r']",
        "wrote 1",
        "read 4 past ['b2', 'b2r', 'b3', 'b3r']",
        "wrote 2",
        "wrote 3",
    ]


async def test_a_failed_write_cancels_the_batches_summarizing_and_writes_nothing_after() -> None:
    stages = Stages(4)
    stages.fail_write = 1
    for event in stages.formed[:2]:
        event.set()
    with pytest.raises(RuntimeError, match="the write failed"):
        await run_pipeline(stages.read, stages.write, ahead=2)
    assert [line for line in stages.log if line.startswith("wrote")] == ["wrote 0"]
    assert stages.next == 4  # read ahead while the second was written
    for event in stages.formed:
        event.set()
    for _ in range(20):
        await asyncio.sleep(0)
    assert stages.finished == [0, 1]  # the others were cancelled: their messages stay pending


async def test_a_claim_past_its_time_stops_reading_but_writes_what_it_read() -> None:
    stages = Stages(4)
    for event in stages.formed:
        event.set()
    assert await run_pipeline(stages.read, stages.write, ahead=2, seconds=0.0) == 1
    assert stages.log == ["read 0 past []", "wrote 0"]  # the first read always happens


async def test_with_none_ahead_each_batch_is_written_before_the_next_is_read() -> None:
    stages = Stages(3)
    for event in stages.formed:
        event.set()
    assert await run_pipeline(stages.read, stages.write, ahead=0) == 3
    assert stages.log == [
        "read 0 past []",
        "wrote 0",
        "read 1 past []",
        "wrote 1",
        "read 2 past []",
        "wrote 2",
        "read 3 past []",
    ]
