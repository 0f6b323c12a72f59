"""Routing: which personality a message addresses, and the directory that knows who can be addressed."""

from __future__ import annotations

import pytest
from sqlalchemy import delete
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.chat.routing import Addressee, RouteReason, RoutingDirectory, find_named, route_message
from memory.owners.personalities import PersonalityService
from models import Personality

LILITH = Addressee(id=1, name="lilith", display_name="Lilith")
SAGE = Addressee(id=2, name="sage", display_name="Sage")
WISE = Addressee(id=3, name="old-owl", display_name="Old Owl")
ALL = [LILITH, SAGE, WISE]


@pytest.mark.parametrize(
    ("text", "expected", "rest"),
    [
        ("@Lilith hello", LILITH, "hello"),
        ("lilith, what's up?", LILITH, "what's up?"),
        ("LILITH: tell me", LILITH, "tell me"),
        ("hey @sage how are you", SAGE, "hey @sage how are you"),
        ("Old Owl, a riddle please", WISE, "a riddle please"),
        ("@old-owl hoot", WISE, "hoot"),
    ],
)
def test_named(text: str, expected: Addressee, rest: str) -> None:
    found = find_named(text, ALL)
    assert found is not None
    assert found[0] == expected
    assert found[1] == rest


@pytest.mark.parametrize(
    "text",
    ["hello there", "Lilithian studies", "I met lilith yesterday", "email me@lilith.com", "sage advice"],
)
def test_not_named(text: str) -> None:
    assert find_named(text, ALL) is None


def test_first_named_wins() -> None:
    found = find_named("@sage and @lilith both", ALL)
    assert found is not None and found[0] == SAGE


def test_name_beats_reply_and_binding() -> None:
    route = route_message("@Sage hi", personalities=ALL, bound=[LILITH], reply_to=WISE)
    assert route is not None and route.personality == SAGE and route.reason is RouteReason.NAMED


def test_reply_beats_binding() -> None:
    route = route_message("and then?", personalities=ALL, bound=[LILITH], reply_to=WISE)
    assert route is not None and route.personality == WISE and route.reason is RouteReason.REPLY


def test_binding_oldest_first() -> None:
    route = route_message("anyone?", personalities=ALL, bound=[SAGE, LILITH])
    assert route is not None and route.personality == SAGE and route.reason is RouteReason.BOUND


def test_nothing_addresses() -> None:
    assert route_message("just chatting", personalities=ALL) is None


async def test_directory_caches_names_and_forgets_them_at_each_change(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    personalities = PersonalityService(sessionmaker)
    directory = RoutingDirectory(sessionmaker)
    personalities.subscribe(directory.invalidate)
    lilith, _ = await personalities.create("Lilith")
    assert await directory.route("Lilith, hi", channel_ids=["1"]) is not None
    # Cached: a row removed behind the service's back is still routed to, until the cache expires.
    async with sessionmaker.begin() as session:
        await session.execute(delete(Personality).where(Personality.id == lilith.id))
    assert await directory.route("Lilith, hi", channel_ids=["1"]) is not None
    # A change through the service is seen at once.
    sage, _ = await personalities.create("Sage")
    assert await directory.route("Lilith, hi", channel_ids=["1"]) is None
    await personalities.edit("sage", actor=None, display_name="Old Sage")
    route = await directory.route("Old Sage, hi", channel_ids=["1"])
    assert route is not None and route.personality.id == sage.id and route.text == "hi"
    await personalities.delete("sage", actor=None)
    assert await directory.route("Old Sage, hi", channel_ids=["1"]) is None
