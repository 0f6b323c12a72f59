"""Background tasks: kept referenced, failures logged by name, drained or cancelled on close."""

from __future__ import annotations

import asyncio
import logging

import pytest

from bot.tasks import BackgroundTasks


async def test_a_failure_is_logged_with_the_task_name(caplog: pytest.LogCaptureFixture) -> None:
    tasks = BackgroundTasks()

    async def fail() -> None:
        raise RuntimeError("boom")

    with caplog.at_level(logging.ERROR, logger="bot.tasks"):
        tasks.spawn(fail(), name="personae-test-failure")
        await tasks.drain()
    assert len(tasks) == 0
    [record] = [r for r in caplog.records if r.name == "bot.tasks"]
    assert "personae-test-failure" in record.getMessage()
    assert record.exc_info is not None and isinstance(record.exc_info[1], RuntimeError)


async def test_drain_waits_for_work_spawned_by_work_but_not_for_named_loops() -> None:
    tasks = BackgroundTasks()
    done: list[str] = []

    async def child() -> None:
        await asyncio.sleep(0.01)
        done.append("child")

    async def parent() -> None:
        await asyncio.sleep(0.01)
        tasks.spawn(child(), name="child")
        done.append("parent")

    async def forever() -> None:
        await asyncio.Event().wait()

    loop = tasks.spawn(forever(), name="loop")
    tasks.spawn(parent(), name="parent")
    await asyncio.wait_for(tasks.drain(keep_running=("loop",)), timeout=5)
    assert done == ["parent", "child"]
    assert not loop.done()
    await tasks.cancel_all()
    assert loop.cancelled() and len(tasks) == 0
