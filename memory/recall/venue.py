"""What a recall needs before it searches: the query's dense vector, whether the user's DM memories
may come in a guild, and the participants' names (read beside the embedding, in one query)."""

from __future__ import annotations

import asyncio

from sqlalchemy import BindParameter, Integer, ScalarSelect, String, bindparam, func, literal, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from memory.owners.user_settings import fresh_setting
from memory.recall.query import dense_query, names_of
from memory.recall.store import MemoryStore
from models import UserSettings


async def query_vector_and_venue(
    store: MemoryStore,
    session: AsyncSession,
    personality_id: int,
    user_id: str,
    query: str,
    *,
    in_guild: bool,
    for_reply: bool,
) -> tuple[list[float], bool, frozenset[str]] | None:
    """The dense query's vector, whether the user's DM memories may come (`allow_dm`), and the
    participants' names; None when `for_reply` and the user chose fresh mode.

    The embedding runs in its thread while Postgres answers: the DM setting (and fresh mode, for a
    reply) is read beside it (never kept: a user turning it off is obeyed at once, by every
    process), and the participants' names too when they are not kept, in the same query. Those
    names are then not known yet: the query is embedded as given, and again without them only when
    it names one.
    """
    names = store.participants.kept(personality_id, user_id)
    text = dense_query(query, names or ())
    embedding = asyncio.ensure_future(store.embedder.embed([text]))
    try:
        if names is None:
            fresh = fresh_setting(user_id, personality_id) if for_reply else literal(None)
            names_read = names_of(personality_id, user_id).subquery()
            venue = select(
                select(func.array_agg(names_read.c.name)).scalar_subquery(),
                _allows_dm(user_id, personality_id),
                fresh,
            )
            listed, allow_dm, is_fresh = (await session.execute(venue)).one()
            names = frozenset(name for name in listed or () if name)
            store.participants.keep(personality_id, user_id, names)
        elif in_guild or for_reply:
            settings = _SETTINGS_FOR_REPLY if for_reply else _SETTINGS
            ids = {"user_id": user_id, "personality_id": personality_id}
            allow_dm, is_fresh = (await session.execute(settings, ids)).one()
        else:
            allow_dm = is_fresh = False
    except BaseException:
        embedding.cancel()
        raise
    if is_fresh:
        embedding.cancel()
        return None
    [dense] = await embedding
    if dense_query(query, names) != text:
        [dense] = await store.embedder.embed([dense_query(query, names)])
    return dense, bool(in_guild and allow_dm), names


def _allows_dm(
    user_id: str | BindParameter[str], personality_id: int | BindParameter[int]
) -> ScalarSelect[bool | None]:
    """Whether the user let their DM memories (of this personality, or of all) be recalled in guilds."""
    return (
        select(func.bool_or(UserSettings.allow_dm_recall_in_guilds))
        .where(
            UserSettings.user_id == user_id,
            or_(UserSettings.personality_id.is_(None), UserSettings.personality_id == personality_id),
        )
        .scalar_subquery()
    )


# The user's settings a recall reads once the participants' names are known (every recall of a user
# but the first in a process), built once with the ids as parameters: built anew, ~0.5 ms of each
# recall's event loop (0.7 with fresh mode).
_USER_ID: BindParameter[str] = bindparam("user_id", type_=String)
_PERSONALITY_ID: BindParameter[int] = bindparam("personality_id", type_=Integer)
_SETTINGS = select(_allows_dm(_USER_ID, _PERSONALITY_ID), literal(None))
_SETTINGS_FOR_REPLY = select(_allows_dm(_USER_ID, _PERSONALITY_ID), fresh_setting(_USER_ID, _PERSONALITY_ID))
