"""Where a reliability case runs: a fresh PostgreSQL database, a data folder, two LLM test servers
(the chat model; the summarizer and embeddings) and personae's own runtime on them, built from the
same settings `personae` reads, so in-process calls and `personae ...` subprocesses see one deployment.

Embeddings come from the LLM test server over HTTP (a deterministic hash, as `text-embedding-3-small`
is sized), not the local model: the cases test who gets which memory, not how well it matches.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from models.database import create_engine
from testkit.llm_server import LLMTestServer

if TYPE_CHECKING:
    from bench.reliability_cases import Scale
    from bot.runtime import Runtime
    from bot.settings import BotSettings

# A model litellm knows the size of (1536), so every process agrees on the index dimension.
EMBEDDING_MODEL = "openai/text-embedding-3-small"
EMBEDDING_DIM = 1536
ADMIN_ID = "900"
_counter = itertools.count(1)


def database_url_for(url: str, name: str) -> str:
    """The same server's URL for another database (the path's last part, query kept)."""
    base, _, query = url.partition("?")
    return base.rsplit("/", 1)[0] + f"/{name}" + (f"?{query}" if query else "")


MEMORIES_SQL = (
    "SELECT id, personality_id, user_id, guild_id, is_dm, content, content_verbatim, "
    "source_message_ids, state FROM memories ORDER BY id"
)


async def rows_at(url: str, sql: str, **params: Any) -> list[Mapping[str, Any]]:
    """The rows of one query on the database at url (a connection of its own, closed after)."""
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.connect() as connection:
            return [dict(row._mapping) for row in await connection.execute(text(sql), params)]
    finally:
        await engine.dispose()


async def prepare_database(url: str, *personalities: str, memory_mode: str = "verbatim") -> None:
    """Migrate the database at url and create these personalities in it (what `personae personality
    create` does, without the cost of a process)."""
    from memory.owners.personalities import PersonalityService
    from models.database import create_sessionmaker
    from models.migrate import upgrade_database

    engine = create_engine(url, pool_size=1)
    try:
        await upgrade_database(engine)
        service = PersonalityService(create_sessionmaker(engine))
        for name in personalities:
            await service.create(name, memory_mode=memory_mode)
    finally:
        await engine.dispose()


@dataclass
class Cluster:
    """A PostgreSQL server in which each lab gets a database of its own."""

    url: str  # an asyncpg URL of any database on the server

    async def create_database(self, name: str) -> str:
        engine = create_engine(self.url)
        try:
            async with engine.connect() as connection:
                await connection.execution_options(isolation_level="AUTOCOMMIT")
                await connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
                await connection.execute(text(f'CREATE DATABASE "{name}"'))
        finally:
            await engine.dispose()
        return database_url_for(self.url, name)


@dataclass(frozen=True, slots=True)
class CliResult:
    code: int
    out: str
    err: str

    @property
    def traceback(self) -> bool:
        return "Traceback (most recent call last)" in self.err

    def one_line(self) -> str:
        """The last line on stderr, from `personae:` on when a progress bar shares its line."""
        lines = [line for line in self.err.strip().splitlines() if line.strip()]
        last = lines[-1] if lines else ""
        return last[last.rindex("personae:") :] if "personae:" in last else last


@dataclass
class Lab:
    """One case's (or one area's) deployment; see the module docstring."""

    name: str
    workdir: Path
    database_url: str
    cluster: Cluster
    llm: LLMTestServer  # summarizer and embeddings
    chat_llm: LLMTestServer  # the chat model
    engine: AsyncEngine
    settings_overrides: dict[str, Any] = field(default_factory=dict)
    runtime_handle: Runtime | None = None
    _stack: AsyncExitStack = field(default_factory=AsyncExitStack)

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    @property
    def runtime(self) -> Runtime:
        if self.runtime_handle is None:
            raise RuntimeError(f"lab {self.name} was opened without a runtime")
        return self.runtime_handle

    def settings(self, **overrides: Any) -> BotSettings:
        from bot.settings import load_bot_settings

        values: dict[str, Any] = {
            "database_url": self.database_url,
            "qdrant_url": None,
            "personae_data_dir": self.data_dir,
            "chat_model": "openai/test-chat",
            "chat_api_base": self.chat_llm.base_url,
            "chat_api_key": "test",
            "summarizer_model": "openai/test-summarizer",
            "summarizer_api_base": self.llm.base_url,
            "summarizer_api_key": "test",
            "embedding_model": EMBEDDING_MODEL,
            "embedding_api_base": self.llm.base_url,
            "llm_timeout": 10.0,
            "llm_max_retries": 1,
            "admin_ids": [ADMIN_ID],
        }
        values.update(self.settings_overrides)
        values.update(overrides)
        return load_bot_settings(**values)

    def environ(self, **overrides: Any) -> dict[str, str]:
        """The environment a `personae` subprocess of this deployment runs with."""
        settings = self.settings(**overrides)
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in {"DATABASE_URL", "DISCORD_TOKEN", "QDRANT_URL", "CHAT_MODEL", "SUMMARIZER_MODEL"}
        }
        for name, value in settings.model_dump().items():
            if value is None:
                continue
            if hasattr(value, "get_secret_value"):
                value = value.get_secret_value()
            if isinstance(value, list):
                import json

                value = json.dumps(value)
            env[name.upper()] = str(value)
        env["PYTHONUNBUFFERED"] = "1"
        env["OPENAI_API_KEY"] = "test"  # the embedding model's key (the test server ignores it)
        return env

    def reset(self) -> None:
        """Between two cases sharing this lab: default behaviour on both LLM servers."""
        for server in (self.llm, self.chat_llm):
            server.reset()

    @asynccontextmanager
    async def open_runtime(self, *, rebuild_index: bool = False, **overrides: Any) -> AsyncIterator[Runtime]:
        """personae's Runtime (`bot.runtime.open_core` + `open_memory_services`) on this lab's settings,
        its embedder given the key the test server ignores (settings carry none for embeddings);
        `rebuild_index` starts a damaged index empty, as `personae reindex` opens it."""
        from bot.runtime import open_core, open_memory_services
        from memory.recall.embedders import make_embedder

        settings = self.settings(**overrides)
        embedder = make_embedder(EMBEDDING_MODEL, api_base=settings.embedding_api_base, api_key="test")
        async with (
            open_core(settings) as core,
            open_memory_services(core, embedder=embedder, rebuild_index=rebuild_index) as runtime,
        ):
            yield runtime

    async def command(self, scale: Scale, *args: str, **overrides: Any) -> CliResult:
        """`personae ARGS` where a case checks what the command says and writes, not its process: at the
        quick scale in this process (the CLI's parser and handler on a runtime of its own, opened and
        its errors said as bot.cli.app does: one line and exit 1, a traceback on stderr otherwise); a
        subprocess (`cli`) at full scale. Its own data folder unless overridden, as `cli`'s."""
        if not scale.quick:
            return await self.cli(*args, **overrides)
        import contextlib
        import io
        import traceback

        from bot.cli import build_parser
        from bot.cli.output import CommandError, one_line
        from memory.errors import UserFacingError
        from memory.retry import LLMUnavailableError

        parsed = build_parser().parse_args(list(args))
        # `personae reindex` (not --check) may start a damaged index (bot.cli.app.run_handler).
        rebuild = getattr(parsed, "rebuilds_index", False) and not getattr(parsed, "check", False)
        overrides.setdefault("personae_data_dir", self.workdir / "cli-data")
        out = io.StringIO()
        try:
            async with self.open_runtime(rebuild_index=rebuild, **overrides) as runtime:
                with contextlib.redirect_stdout(out):
                    await parsed.handler(parsed, runtime)
        except (CommandError, UserFacingError, LLMUnavailableError) as exc:
            return CliResult(1, out.getvalue(), f"personae: {one_line(str(exc))}")
        except SystemExit as exc:  # `reindex --check` exits 1 on drift
            return CliResult(int(exc.code or 0), out.getvalue(), "")
        except Exception:
            return CliResult(1, out.getvalue(), traceback.format_exc())
        return CliResult(0, out.getvalue(), "")

    async def cli(self, *args: str, limit: float = 300.0, **overrides: Any) -> CliResult:
        """`personae ARGS` in a subprocess of this deployment (its own data folder unless overridden)."""
        process = await self.spawn(*args, **overrides)
        try:
            out, err = await asyncio.wait_for(process.communicate(), limit)
        except TimeoutError:
            process.kill()
            out, err = await process.communicate()
            return CliResult(-9, out.decode(errors="replace"), err.decode(errors="replace") + "\n(timed out)")
        return CliResult(process.returncode or 0, out.decode(errors="replace"), err.decode(errors="replace"))

    async def spawn(self, *args: str, **overrides: Any) -> asyncio.subprocess.Process:
        overrides.setdefault("personae_data_dir", self.workdir / "cli-data")
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bot.cli",
            *args,
            env=self.environ(**overrides),
            cwd=self.workdir,  # no stray .env from wherever the suite was started
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )

    async def rows(self, sql: str, **params: Any) -> list[Mapping[str, Any]]:
        async with self.engine.connect() as connection:
            result = await connection.execute(text(sql), params)
            return [dict(row._mapping) for row in result]

    async def scalar(self, sql: str, **params: Any) -> Any:
        async with self.engine.connect() as connection:
            return (await connection.execute(text(sql), params)).scalar()

    async def memories(self) -> list[Mapping[str, Any]]:
        """Every memory row, in a stable order, with what a comparison needs."""
        return await self.rows(MEMORIES_SQL)

    async def pending_messages(self) -> int:
        return int(await self.scalar("SELECT count(*) FROM messages WHERE memory_processed_at IS NULL"))

    async def aclose(self) -> None:
        await self._stack.aclose()


@asynccontextmanager
async def open_lab(
    cluster: Cluster, root: Path, name: str, *, runtime: bool = True, **settings: Any
) -> AsyncIterator[Lab]:
    """A lab with a fresh database `rel_<name>_<n>` and folder under root; closed and removed on exit."""
    slug = f"rel_{name.replace('-', '_')}_{next(_counter)}"
    workdir = root / slug
    workdir.mkdir(parents=True)
    url = await cluster.create_database(slug)
    async with AsyncExitStack() as stack:
        llm = await stack.enter_async_context(LLMTestServer(embedding_dim=EMBEDDING_DIM))
        chat_llm = await stack.enter_async_context(LLMTestServer(embedding_dim=EMBEDDING_DIM))
        engine = create_engine(url, pool_size=2)
        stack.push_async_callback(engine.dispose)
        lab = Lab(name, workdir, url, cluster, llm, chat_llm, engine, dict(settings))
        stack.push_async_callback(lab.aclose)
        if runtime:
            lab.runtime_handle = await stack.enter_async_context(lab.open_runtime())
        else:
            # The schema, as any personae process would leave it.
            from models.migrate import upgrade_database

            await upgrade_database(engine)
        yield lab
    shutil.rmtree(workdir, ignore_errors=True)


class LabPool:
    """One lab per area, opened on first use and kept for the area's cases; closed together."""

    def __init__(self, cluster: Cluster, root: Path, options: Mapping[str, Mapping[str, Any]]) -> None:
        self.cluster = cluster
        self.root = root
        self._options = options
        self._labs: dict[str, Lab] = {}
        self._stack = AsyncExitStack()

    async def get(self, area: str) -> Lab:
        if area not in self._labs:
            options = dict(self._options.get(area, {}))
            self._labs[area] = await self._stack.enter_async_context(
                open_lab(self.cluster, self.root, area, **options)
            )
        lab = self._labs[area]
        lab.reset()
        return lab

    async def aclose(self) -> None:
        await self._stack.aclose()
