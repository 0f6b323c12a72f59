"""Shared fixtures: one real PostgreSQL per run (embedded, or TEST_DATABASE_URL), each test process
(pytest-xdist worker) with its own database cloned from a migrated template (testkit/postgres.py).

Each test gets a sessionmaker bound to a connection whose outer transaction is rolled back, so tests
see only their own rows (rafsaf's pattern). Tests that need real commits across connections (worker
races) use `committed_sessionmaker`, which empties the tables afterwards. Tiers, timeouts and the
children a test leaves behind: tests/tiers.py (docs/TESTING.md).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bot.runtime import Runtime
from memory.recall.embedders import Embedder
from memory.recall.local_embedder import LocalEmbedder
from models.database import create_engine
from testkit.cli import INHERITED, cli_environment
from testkit.llm_server import LLMTestServer
from testkit.postgres import RunCluster, join_run_cluster, leave_run_cluster, run_root
from testkit.processes import children, kill_children, reset_signal_dispositions
from testkit.ram_tmp import prefer_ram_tempdir
from tests import tiers
from tests.tiers import mark_tiers, register_markers

_RUN_ID = "PERSONAE_TEST_RUN"
_ROOT = Path(__file__).resolve().parents[1]
# This checkout's code, not the packages in its .venv.
_OURS = tuple(f"{_ROOT / package}{os.sep}" for package in ("bot", "memory", "models", "testkit", "tests"))


def pytest_configure(config: pytest.Config) -> None:
    reset_signal_dispositions()
    register_markers(config)
    config.pluginmanager.register(tiers, "personae-tiers")  # its hook: the timeouts' backstop
    prefer_ram_tempdir()
    # `python -m bot.cli` in a subprocess runs this checkout's code whatever its working directory (a
    # test's tmp folder would otherwise find the installed one, another checkout's in a worktree).
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_ROOT), os.environ.get("PYTHONPATH")]))
    # The controller names the run; xdist workers inherit its environment, so they share one server.
    if not hasattr(config, "workerinput"):
        os.environ.setdefault(_RUN_ID, uuid.uuid4().hex)


def pytest_unconfigure(config: pytest.Config) -> None:
    # The controller outlives every worker: it stops the run's server and deletes its folder.
    if not hasattr(config, "workerinput") and _RUN_ID in os.environ:
        leave_run_cluster(run_root(os.environ[_RUN_ID]))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mark_tiers(config, items)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Under `--dist loadgroup`, pytest-xdist tags each grouped test's id with `@group`; where a pytest
    release breaks that (9.2 did), groups silently spread over workers, and the real-model tier starts
    one model per worker that starve each other on two cores. Fail before any fixture starts."""
    if not getattr(item.config.option, "loadgroup", False):  # set on xdist workers only
        return
    if item.get_closest_marker("xdist_group") is not None and "@" not in item.nodeid:
        pytest.fail(
            "pytest-xdist did not group this test: this pytest and pytest-xdist do not work together; "
            "install the versions requirements.lock pins (scripts/setup)",
            pytrace=False,
        )


@pytest.fixture(autouse=True)
def _children_die_with_their_test() -> Iterator[None]:
    """Whatever a test started and left running (it failed, or timed out, before stopping it) is
    killed with the test rather than outliving the run."""
    before = children()
    yield
    kill_children(children() - before)


@pytest.fixture(scope="session")
def worker_name(worker_id: str) -> str:
    """`gw0`, `gw1`... under xdist, `main` otherwise: the suffix of this process's databases."""
    return worker_id if worker_id != "master" else "main"


@pytest.fixture(scope="session")
def run_cluster() -> RunCluster:
    """The run's PostgreSQL: TEST_DATABASE_URL when set (a throwaway server!), else embedded."""
    url = os.environ.get("TEST_DATABASE_URL")
    if url:
        url = url.replace("postgresql://", "postgresql+asyncpg://", 1)
    return join_run_cluster(run_root(os.environ[_RUN_ID]), url)


@pytest.fixture(scope="session")
async def database_url(run_cluster: RunCluster, worker_name: str) -> str:
    """This process's database, migrated (a clone of the run's template)."""
    return await run_cluster.clone(f"personae_test_{worker_name}")


@pytest.fixture(scope="session")
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(database_url)
    yield engine
    await engine.dispose()


@pytest.fixture
async def sessionmaker(engine: AsyncEngine) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    """Sessions inside one outer transaction that is rolled back after the test."""
    async with engine.connect() as connection:
        transaction = await connection.begin()
        yield async_sessionmaker(
            bind=connection, expire_on_commit=False, join_transaction_mode="create_savepoint"
        )
        if transaction.is_active:
            await transaction.rollback()


@pytest.fixture
async def committed_sessionmaker(engine: AsyncEngine) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    """Real commits visible to every connection; all tables are emptied afterwards."""
    before = asyncio.all_tasks()
    yield async_sessionmaker(engine, expire_on_commit=False)
    await _stop_tasks_left_running(before)
    async with engine.begin() as connection:
        # A connection some leftover still holds in a transaction fails the teardown, never hangs it.
        await connection.execute(text("SET LOCAL lock_timeout = '60s'"))
        tables = (
            await connection.execute(
                text(
                    "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                    "AND tablename <> 'alembic_version'"
                )
            )
        ).scalars()
        names = ", ".join(f'"{name}"' for name in tables)
        if names:
            await connection.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))


async def _stop_tasks_left_running(before: set[asyncio.Task[Any]]) -> None:
    """Cancel this checkout's coroutines that the test started and left running (a failed test's
    formation pass, say): the suite's tests share one event loop, and a pass still running would
    write into the next test's tables. Third-party ones (discord.py's view timers) are left be."""
    current = asyncio.current_task()
    left = [
        task
        for task in asyncio.all_tasks()
        if task not in before
        and task is not current
        and not task.done()
        and getattr(getattr(task.get_coro(), "cr_code", None), "co_filename", "").startswith(_OURS)
    ]
    for task in left:
        task.cancel()
    if left:
        await asyncio.wait(left, timeout=30)


@pytest.fixture
async def scratch_database_url(run_cluster: RunCluster, worker_name: str) -> str:
    """A database of its own at the newest schema, for tests whose commits (subprocesses, CLI runs) must
    not leak: a fresh clone of the template, so no command of the test pays for the migrations. The
    next test's replaces it; the run's end removes the last."""
    return await run_cluster.clone(f"personae_scratch_{worker_name}")


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, scratch_database_url: str, tmp_path: Path) -> Path:
    """`personae` run in-process (testkit.cli.run) on a scratch database and a data directory of its
    own, with no server or model of the machine's environment; the test's folder, for its files."""
    for name, value in cli_environment(scratch_database_url, tmp_path / "data").items():
        monkeypatch.setenv(name, value)
    for name in INHERITED:
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.fixture
async def empty_database_url(run_cluster: RunCluster, worker_name: str) -> str:
    """A database of its own with no schema at all, for tests of the migrations themselves."""
    return await run_cluster.empty(f"personae_empty_{worker_name}")


@pytest.fixture
async def llm_server() -> AsyncIterator[LLMTestServer]:
    """An OpenAI-compatible server on 127.0.0.1 that answers, stalls, fails or drops as scripted."""
    async with LLMTestServer() as server:
        yield server


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The real local embedding model (all-MiniLM-L6-v2 on onnxruntime, offline), loaded once per session
    from the export scripts/setup made (made on first use otherwise)."""
    return LocalEmbedder()


@asynccontextmanager
async def open_test_runtime(
    engine: AsyncEngine,
    sessionmaker: async_sessionmaker[AsyncSession],
    embedder: Embedder,
    data_dir: Path,
    **settings: Any,
) -> AsyncIterator[Runtime]:
    """The bot's Runtime built the way bot/runtime.py builds it, from the test pieces: a pooled
    sessionmaker with real commits (the concurrent path production runs), a fresh Qdrant Edge under
    `data_dir`, the real embedder, and these settings."""
    from bot.runtime import build_core, open_memory_services
    from bot.settings import load_bot_settings

    values: dict[str, Any] = {
        "database_url": None,
        "qdrant_url": None,
        "personae_data_dir": data_dir,
        "llm_timeout": 5.0,
        "catch_up_seconds": 0,  # no timer racing the test; the tests of the timer turn it on
        "llm_max_retries": 1,
        "admin_ids": ["900"],
    }
    core = build_core(load_bot_settings(**(values | settings)), engine, sessionmaker)
    async with open_memory_services(core, embedder=embedder) as runtime:
        yield runtime


@pytest.fixture
async def runtime(
    committed_sessionmaker: async_sessionmaker[AsyncSession],
    engine: AsyncEngine,
    embedder: Embedder,
    llm_server: LLMTestServer,
    tmp_path: Path,
) -> AsyncIterator[Runtime]:
    """The bot's Runtime (tables emptied after the test), the LLM test server as chat and summarizer."""
    async with open_test_runtime(
        engine,
        committed_sessionmaker,
        embedder,
        tmp_path / "data",
        chat_model="openai/test-chat",
        chat_api_base=llm_server.base_url,
        chat_api_key="test",
        summarizer_model="openai/test-summarizer",
        summarizer_api_base=llm_server.base_url,
        summarizer_api_key="test",
    ) as runtime:
        yield runtime


@pytest.fixture
async def runtime_without_chat_model(
    committed_sessionmaker: async_sessionmaker[AsyncSession],
    engine: AsyncEngine,
    embedder: Embedder,
    tmp_path: Path,
) -> AsyncIterator[Runtime]:
    """The bot's Runtime of a deployment that set no CHAT_MODEL (nor SUMMARIZER_MODEL)."""
    async with open_test_runtime(engine, committed_sessionmaker, embedder, tmp_path / "data") as runtime:
        yield runtime
