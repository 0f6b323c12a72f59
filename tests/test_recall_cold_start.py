"""A cold `personae recall`, started as a user starts it (a process of its own): what it imports, and
how its start-up leaves the garbage collector out."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from testkit.cli import run

EXPECT_SECONDS = 120  # a bound against a hang, not a timing: the shared machine may be slow


@pytest.fixture
def env(cli_env: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """Lilith, created in this process, in the scratch database the recall process opens."""
    code, _, err = run(capsys, "personality", "create", "Lilith")
    assert code == 0, err
    return dict(os.environ)


async def cold_recall(*python: str, env: dict[str, str], cwd: Path) -> str:
    """The stderr of a recall of Lilith's memories of user 42 run as `python PYTHON... recall ...`."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *python,
        *("recall", "Biscuit", "--personality", "lilith", "--user", "42"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=cwd,
    )
    _, err = await asyncio.wait_for(process.communicate(), EXPECT_SECONDS)
    assert process.returncode == 0, err.decode()
    return err.decode()


async def test_recall_loads_nothing_it_does_not_use(env: dict[str, str], tmp_path: Path) -> None:
    """wordfreq (fact checks) and emoji (cleaning text) cost ~0.5 s to load, lemminflect's tables ~0.3 s
    (a question without a head noun needs none of its word forms), litellm ~1 s, discord and alembic
    (the schema at head) more: a recall uses none of them."""
    err = await cold_recall("-X", "importtime", "-m", "bot.cli", env=env, cwd=tmp_path)
    imported = {line.rsplit("|", 1)[-1].strip() for line in err.splitlines() if "|" in line}
    assert "memory.chat.service" in imported  # the recall did run through the services
    unused = {"wordfreq", "emoji", "langcodes", "litellm", "lemminflect", "discord", "alembic", "torch"}
    assert imported & unused == set()


async def test_recall_leaves_the_garbage_collector_out_of_its_start_up(
    env: dict[str, str], tmp_path: Path
) -> None:
    """Start-up makes ~100,000 lasting objects and little garbage: ~240 collector passes over them
    cost a cold recall ~60 ms, and the last collection at exit ~0.2 s (the heap is frozen then). A
    caller that goes on after `main` gets the collector back as it was."""
    script = (
        "import atexit, gc, sys\n"
        # Registered first, so run last: after what main registered.
        "atexit.register(lambda: print('exit', gc.get_freeze_count() > 0, file=sys.stderr))\n"
        "passes = []\n"
        "gc.callbacks.append(lambda phase, info: phase == 'start' and passes.append(info['generation']))\n"
        "from bot.cli import main\n"
        "code = main(sys.argv[1:])\n"
        "print('passes', len(passes), gc.isenabled(), gc.get_freeze_count(), file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    err = await cold_recall("-c", script, env=env, cwd=tmp_path)
    _, passes, enabled, frozen = err.splitlines()[-2].split()
    assert int(passes) < 100  # ~240 with the collector on from the start
    assert (enabled, frozen) == ("True", "0")
    assert err.splitlines()[-1] == "exit True"
