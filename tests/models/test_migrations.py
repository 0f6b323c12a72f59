"""The schema is made only by migrations: they go up and down cleanly and match the models."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from sqlalchemy.ext.asyncio import AsyncEngine

import migrations
from models import Base
from models.database import create_engine
from models.migrate import alembic_config, current_revision, downgrade_database, upgrade_database

EXPECTED_TABLES = {
    "llm_configs",
    "system_prompts",
    "personalities",
    "user_settings",
    "conversations",
    "messages",
    "summaries",
    "memories",
    "personas",
    "incognito_sessions",
    "channel_bindings",
    "forgotten_claims",
    "reply_memories",
    "personality_pictures",
}


@pytest.fixture
async def scratch_engine(empty_database_url: str) -> AsyncIterator[AsyncEngine]:
    """A separate, empty database so up/down migrations don't disturb the shared one."""
    scratch = create_engine(empty_database_url)
    yield scratch
    await scratch.dispose()


async def _tables(engine: AsyncEngine) -> set[str]:
    async with engine.connect() as connection:
        names = await connection.run_sync(lambda sync: inspect(sync).get_table_names())
    return set(names) - {"alembic_version"}


async def test_upgrade_downgrade_upgrade(scratch_engine: AsyncEngine) -> None:
    assert await _tables(scratch_engine) == set()
    await upgrade_database(scratch_engine)
    assert await _tables(scratch_engine) == EXPECTED_TABLES
    assert await current_revision(scratch_engine) is not None

    await downgrade_database(scratch_engine, "base")
    assert await _tables(scratch_engine) == set()
    assert await current_revision(scratch_engine) is None

    await upgrade_database(scratch_engine)
    await upgrade_database(scratch_engine)  # idempotent at head
    assert await _tables(scratch_engine) == EXPECTED_TABLES


async def test_models_match_migrations(engine: AsyncEngine) -> None:
    """Autogenerate finds nothing to do: no model change lacks its migration."""
    async with engine.connect() as connection:
        diff = await connection.run_sync(
            lambda sync: compare_metadata(
                MigrationContext.configure(sync, opts={"compare_type": True}), Base.metadata
            )
        )
    assert diff == []


async def test_reply_links_are_filled_for_the_existing_log(scratch_engine: AsyncEngine) -> None:
    """0002 links each stored reply to the nearest user message before it in its conversation (the
    pairing formation used until then), and goes down and up again cleanly."""
    await upgrade_database(scratch_engine, "0001")
    async with scratch_engine.begin() as connection:
        await connection.execute(
            text("INSERT INTO personalities (id, name, display_name) VALUES (1, 'lilith', 'Lilith')")
        )
        await connection.execute(
            text("INSERT INTO conversations (id, personality_id, venue_key) VALUES (1, 1, 'a'), (2, 1, 'b')")
        )
        rows = [
            (1, 1, "assistant"),  # before any user message: answers nothing
            (2, 1, "user"),
            (3, 2, "user"),  # another conversation, in between
            (4, 1, "assistant"),
            (5, 1, "assistant"),  # a second part
            (6, 2, "assistant"),
            (7, 1, "user"),
            (8, 1, "user"),
            (9, 1, "assistant"),
        ]
        for row_id, conversation_id, role in rows:
            await connection.execute(
                text(
                    "INSERT INTO messages (id, conversation_id, external_id, author_id, role, content) "
                    "VALUES (:id, :c, :e, 'x', :role, 'text')"
                ),
                {"id": row_id, "c": conversation_id, "e": f"m{row_id}", "role": role},
            )
    await upgrade_database(scratch_engine)
    async with scratch_engine.connect() as connection:
        links: dict[int, int | None] = dict(
            (await connection.execute(text("SELECT id, reply_to_id FROM messages"))).all()
        )
    assert links == {1: None, 2: None, 3: None, 4: 2, 5: 2, 6: 3, 7: None, 8: None, 9: 8}

    await downgrade_database(scratch_engine, "0001")
    async with scratch_engine.connect() as connection:
        columns = await connection.run_sync(lambda sync: inspect(sync).get_columns("messages"))
        assert "reply_to_id" not in {c["name"] for c in columns}
        assert await connection.scalar(text("SELECT count(*) FROM messages")) == 9
    await upgrade_database(scratch_engine)
    assert await current_revision(scratch_engine) == migrations.HEAD


def test_migrations_head_names_the_newest_revision() -> None:
    """`migrations.HEAD` lets a command skip Alembic when the schema is current: it must be Alembic's
    head (after adding a migration, set it to the new revision)."""

    assert ScriptDirectory.from_config(alembic_config()).get_heads() == [migrations.HEAD]


async def test_an_upgrade_at_head_reads_one_row_and_a_stale_database_is_migrated(
    scratch_engine: AsyncEngine,
) -> None:
    await upgrade_database(scratch_engine, "0003_steering")
    await upgrade_database(scratch_engine)  # the recorded revision is not HEAD: Alembic upgrades it
    assert await current_revision(scratch_engine) == migrations.HEAD
    assert await _tables(scratch_engine) == EXPECTED_TABLES


async def test_conversation_keys_name_their_guild(scratch_engine: AsyncEngine) -> None:
    """0005 keys a guild conversation that named no channel apart from the user's DMs, and a channel by
    its guild; down again, each goes back to its old key where no other took it first."""
    await upgrade_database(scratch_engine, "0005_i18_summary_fallback")
    async with scratch_engine.begin() as connection:
        await connection.execute(
            text("INSERT INTO personalities (id, name, display_name) VALUES (1, 'lilith', 'Lilith')")
        )
        await connection.execute(
            text(
                "INSERT INTO conversations (id, personality_id, venue_key, guild_id, channel_id, is_dm) "
                "VALUES "
                "(1, 1, 'dm:42', 'G1', NULL, false), (2, 1, 'dm:43', NULL, 'd9', true), "
                "(3, 1, 'ch:55', 'G1', '55', false)"
            )
        )
    await upgrade_database(scratch_engine)
    keys = "SELECT id, venue_key FROM conversations ORDER BY id"
    async with scratch_engine.begin() as connection:
        assert (await connection.execute(text(keys))).all() == [
            (1, "g:G1:u:42"),
            (2, "dm:43"),
            (3, "ch:G1:55"),
        ]
        # Now a DM of user 42, and channel 55 of another guild, each a conversation of its own.
        await connection.execute(
            text(
                "INSERT INTO conversations (id, personality_id, venue_key, guild_id, channel_id, is_dm) "
                "VALUES "
                "(4, 1, 'dm:42', NULL, NULL, true), (5, 1, 'ch:G2:55', 'G2', '55', false)"
            )
        )
    await downgrade_database(scratch_engine, "0005_i18_summary_fallback")
    async with scratch_engine.connect() as connection:
        assert (await connection.execute(text(keys))).all() == [
            (1, "g:G1:u:42"),  # its old key is the DM's now
            (2, "dm:43"),
            (3, "ch:55"),
            (4, "dm:42"),
            (5, "ch:G2:55"),  # channel 55's old key is guild G1's
        ]
