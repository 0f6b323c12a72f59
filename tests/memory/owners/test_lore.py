"""Lorebooks: which entries a conversation activates (SillyTavern's World Info rules), bounded regex
keys, and the service that lists, adds, edits, enables and disables entries."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.errors import InvalidInputError, NotFoundError, PermissionDeniedError
from memory.owners.cards import create_from_card, export_card, parse_card
from memory.owners.lore import Logic, Position, match_lore, read_lorebook, split_keys
from memory.owners.lore_editing import LoreChanges, LoreService
from memory.owners.personalities import PersonalityService
from tests.memory.owners.cards import ELDORIA_BOOK, SERAPHINA_V2, with_data


def book(*entries: dict[str, Any], **settings: Any) -> dict[str, Any]:
    """A stored card holding a lorebook of these entries (each enabled, with keys and content)."""
    return {"character_book": {"extensions": {}, **settings, "entries": list(entries)}}


def entry(keys: list[str], content: str, **fields: Any) -> dict[str, Any]:
    return {
        "keys": keys,
        "content": content,
        "extensions": {},
        "enabled": True,
        "insertion_order": 100,
        **fields,
    }


def active(card: dict[str, Any], *recent: str, depth: int = 2, user: str = "Ann") -> list[str]:
    found = match_lore(read_lorebook(card), list(recent), default_scan_depth=depth, char="Sera", user=user)
    return [lore.text for lore in found]


def test_keys_match_whole_words_without_case_by_default() -> None:
    card = book(entry(["wolf"], "Wolves roam."), entry(["Dark Forest"], "A forest."))
    assert active(card, "A WOLF howled.") == ["Wolves roam."]
    assert active(card, "a werewolf, wolfish") == []  # not a whole word
    assert active(card, "into the dark forest we go") == ["A forest."]  # a phrase matches as written
    assert active(card, "darkforest") == []


def test_an_entrys_own_case_sensitivity_and_whole_word_setting() -> None:
    card = book(
        entry(["Rose"], "Rose is a knight.", case_sensitive=True),
        entry(["cat"], "Cats everywhere.", extensions={"match_whole_words": False}),
    )
    assert active(card, "a rose garden") == []
    assert active(card, "Rose arrived") == ["Rose is a knight."]
    assert active(card, "concatenate") == ["Cats everywhere."]
    # SillyTavern keeps its case setting in the entry's extensions.
    assert active(book(entry(["Rose"], "R.", extensions={"case_sensitive": True})), "rose") == []


def test_only_the_newest_messages_of_the_scan_depth_count() -> None:
    card = book(entry(["lantern"], "The lantern is cursed."))
    assert active(card, "the lantern", "ok", "fine", depth=2) == []
    assert active(card, "the lantern", "ok", "fine", depth=3) == ["The lantern is cursed."]
    assert active(
        {**card, "character_book": {**card["character_book"], "scan_depth": 3}}, "the lantern", "a", "b"
    ) == ["The lantern is cursed."]  # the book's own depth wins over the deployment's
    deep = book(entry(["lantern"], "Deep.", extensions={"scan_depth": 5}))
    assert active(deep, "the lantern", "1", "2", "3", "4", depth=1) == ["Deep."]  # and the entry's over both


@pytest.mark.parametrize(
    ("logic", "said", "expected"),
    [
        (Logic.AND_ANY, "the glade", False),
        (Logic.AND_ANY, "the glade at night", True),
        (Logic.AND_ALL, "the glade at night", False),
        (Logic.AND_ALL, "the dark glade at night", True),
        (Logic.NOT_ANY, "the glade", True),
        (Logic.NOT_ANY, "the glade at night", False),
        (Logic.NOT_ALL, "the glade at night", True),
        (Logic.NOT_ALL, "the dark glade at night", False),
    ],
)
def test_secondary_keys_follow_the_selective_logic(logic: Logic, said: str, expected: bool) -> None:
    card = book(
        entry(
            ["glade"],
            "Lanterns.",
            secondary_keys=["night", "dark"],
            selective=True,
            extensions={"selectiveLogic": int(logic)},
        )
    )
    assert active(card, said) == (["Lanterns."] if expected else [])
    # Without `selective`, secondary keys are ignored.
    assert active(book(entry(["glade"], "L.", secondary_keys=["night"])), "the glade") == ["L."]


def test_constant_disabled_and_empty_entries() -> None:
    card = book(
        entry([], "Always.", constant=True),
        entry(["moon"], "Never.", enabled=False, constant=True),
        entry(["moon"], ""),
    )
    assert active(card, "nothing said") == ["Always."]
    assert active(card, "the moon") == ["Always."]


def test_regex_keys_where_the_card_asks_for_them() -> None:
    card = book(
        entry([r"drag(on|ons)\b"], "Dragons sleep.", use_regex=True),
        entry(["/b[aeiou]t/i"], "Bats.", use_regex=False),  # SillyTavern's /pattern/flags
        entry(["/(unclosed/"], "Broken."),
        entry(["(also broken"], "Broken too.", use_regex=True),
    )
    assert active(card, "DRAGONS!") == ["Dragons sleep."]  # case-insensitive unless the entry says
    assert active(card, "a BIT of a bat") == ["Bats."]
    assert active(card, "(unclosed (also broken") == []  # a broken pattern matches nothing


def test_a_regex_that_backtracks_forever_costs_a_moment_and_matches_nothing() -> None:
    card = book(
        entry([r"(x+x+)+y"], "Never reached.", use_regex=True),
        entry([r"(a|aa)+$"], "Nor this.", use_regex=True),
        entry(["x"], "Plain keys still work."),
    )
    assert active(card, "x " + "x" * 5000) == ["Plain keys still work."]


def test_recursion_when_the_book_asks_bounded_and_as_entries_allow() -> None:
    chain = [
        entry(["start"], "Mentions alpha."),
        entry(["alpha"], "Mentions beta."),
        entry(["beta"], "Mentions gamma."),
        entry(["gamma"], "Mentions delta."),
        entry(["delta"], "Too deep."),
    ]
    assert active(book(*chain), "start") == ["Mentions alpha."]
    recursive = active(book(*chain, recursive_scanning=True), "start")
    assert recursive == ["Mentions alpha.", "Mentions beta.", "Mentions gamma.", "Mentions delta."]  # 3 steps
    guarded = book(
        entry(["start"], "Mentions alpha.", extensions={"prevent_recursion": True}),
        entry(["alpha"], "A."),
        entry(["start"], "Mentions omega."),
        entry(["omega"], "O.", extensions={"exclude_recursion": True}),
        entry(["omega"], "Only through others.", extensions={"delay_until_recursion": True}),
        recursive_scanning=True,
    )
    assert active(guarded, "start") == ["Mentions alpha.", "Mentions omega.", "Only through others."]
    assert active(guarded, "omega") == ["O."]  # a delayed entry does not match the chat itself


def test_preference_is_priority_then_insertion_order_and_macros_are_filled() -> None:
    card = book(
        entry(["k"], "lowest order", insertion_order=0),
        entry(["k"], "low order", insertion_order=10),
        entry(["k"], "high order", insertion_order=200),
        entry(["k"], "{{char}} knows {{user}}.", insertion_order=1, priority=5),
    )
    assert active(card, "k", user="Bob") == ["Sera knows Bob.", "high order", "low order", "lowest order"]


def test_positions_depths_and_decorators() -> None:
    entries = read_lorebook(
        book(
            entry(["a"], "x", position="after_char"),
            entry(["a"], "x", position="before_char", extensions={"position": 4, "depth": 2, "role": 1}),
            entry(["a"], "x", extensions={"position": 2}),  # the author's note: after the character here
            entry(["a"], "@@depth 0\n@@role assistant\n@@unknown thing\n\nText."),
        )
    ).entries
    assert [(e.position, e.depth, e.role) for e in entries[:4]] == [
        (Position.AFTER, 4, "system"),
        (Position.DEPTH, 2, "user"),
        (Position.AFTER, 4, "system"),
        (Position.DEPTH, 0, "assistant"),
    ]
    assert entries[3].content == "Text."
    assert active(book(*[entry(["a"], "@@dont_activate\nHidden.", constant=True)]), "a") == []
    forced = match_lore(
        read_lorebook(book(entry(["zzz"], "@@activate\nForced."))),
        ["hi"],
        default_scan_depth=2,
        char="S",
        user="U",
    )
    assert [(lore.text, lore.reason) for lore in forced] == [("Forced.", "decorator @@activate")]


def test_a_book_of_the_wrong_shape_is_read_as_far_as_it_goes() -> None:
    odd = {
        "character_book": {
            "entries": [5, "x", {"keys": "wolf, bear", "content": "Beasts.", "insertion_order": "9"}]
        }
    }
    found = read_lorebook(odd).entries
    assert [(e.number, e.keys, e.insertion_order) for e in found] == [(3, ("wolf", "bear"), 100)]
    assert read_lorebook({"character_book": []}).entries == ()
    assert read_lorebook(None).entries == ()


def test_keys_typed_on_one_line() -> None:
    assert split_keys(" Eldoria, the forest ,, /a{1,3}b/i , x") == [
        "Eldoria",
        "the forest",
        "/a{1,3}b/i",
        "x",
    ]


# ----------------------------------------------------------------------------------- the service


async def test_lore_is_listed_added_edited_enabled_and_disabled_and_exports_back(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    personalities = PersonalityService(sessionmaker)
    lore = LoreService(sessionmaker, personalities)
    card = with_data(SERAPHINA_V2, character_book=ELDORIA_BOOK)
    await create_from_card(
        personalities, parse_card(json.dumps(card).encode()), owner_id="7", by_operator=True
    )
    listed = (await lore.book("seraphina", actor="7")).entries
    assert [(e.number, e.label, e.enabled) for e in listed] == [
        (1, "Eldoria", True),
        (2, "Shadowfang", True),
        (3, "Amulet (retired)", False),
        (4, "Glade at night", True),
        (5, "River", True),
    ]
    added = await lore.add(
        "seraphina",
        LoreChanges(keys=["Miso", "cat"], content="Miso is the user's lost cat.", position=Position.AFTER),
        actor="7",
    )
    assert (added.number, added.keys, added.position) == (6, ("Miso", "cat"), Position.AFTER)
    edited = await lore.edit(
        "seraphina", 6, LoreChanges(secondary_keys=["forest"], logic=Logic.NOT_ANY, order=50), actor="7"
    )
    assert (edited.selective, edited.logic, edited.insertion_order, edited.content) == (
        True,
        Logic.NOT_ANY,
        50,
        "Miso is the user's lost cat.",
    )
    assert (await lore.set_enabled("seraphina", 3, enabled=True, actor="7")).enabled
    assert not (await lore.set_enabled("seraphina", 1, enabled=False, actor="7")).enabled

    exported = export_card(await personalities.get("seraphina"))["data"]["character_book"]
    assert exported["name"] == "Eldoria" and exported["scan_depth"] == 2  # the book's own fields stay
    assert exported["entries"][:5] == [
        {**ELDORIA_BOOK["entries"][0], "enabled": False},
        ELDORIA_BOOK["entries"][1],
        {**ELDORIA_BOOK["entries"][2], "enabled": True},
        *ELDORIA_BOOK["entries"][3:],
    ]
    new = exported["entries"][5]
    assert new["id"] == 5 and new["keys"] == ["Miso", "cat"] and new["secondary_keys"] == ["forest"]
    assert new["extensions"] == {"position": 1, "selectiveLogic": 2} and new["insertion_order"] == 50
    card_again = export_card(await personalities.get("seraphina"))
    await personalities.delete("seraphina", actor=None)  # beside it, a copy would read like it: refused
    copy = await create_from_card(
        personalities, parse_card(json.dumps(card_again).encode()), name="copy", by_operator=True
    )
    assert [e.label for e in (await lore.book(copy.personality.name, actor=None)).entries][-1] == "Miso, cat"


async def test_a_personality_made_without_a_card_gets_lore(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    personalities = PersonalityService(sessionmaker)
    lore = LoreService(sessionmaker, personalities)
    await personalities.create("Plain", prompt="You are Plain.")
    assert (await lore.book("plain", actor=None)).entries == ()
    await lore.add("plain", LoreChanges(content="Plain lives in Porto.", constant=True), actor=None)
    data = export_card(await personalities.get("plain"))["data"]
    assert data["character_book"]["entries"][0]["content"] == "Plain lives in Porto."
    assert data["system_prompt"] == "You are Plain."


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (LoreChanges(keys=["k"]), "A lore entry needs its text"),
        (LoreChanges(content="Text."), "A lore entry needs keys that activate it, unless it is constant."),
        (
            LoreChanges(keys=["(x"], content="T", use_regex=True),
            "The key '(x' is not a valid regular expression",
        ),
        (LoreChanges(keys=["/(x/"], content="T"), "The key '/(x/' is not a valid regular expression"),
        (LoreChanges(keys=["k" * 201], content="T"), "is over 200 characters; shorten it."),
        (LoreChanges(keys=["k"], content="T" * 50_001), "The text is over 50,000 characters; shorten it."),
    ],
)
async def test_bad_entries_are_refused_in_one_line_and_nothing_is_written(
    sessionmaker: async_sessionmaker[AsyncSession], changes: LoreChanges, message: str
) -> None:
    personalities = PersonalityService(sessionmaker)
    lore = LoreService(sessionmaker, personalities)
    await personalities.create("Plain")
    with pytest.raises(InvalidInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        await lore.add("plain", changes, actor=None)
    assert (await personalities.get("plain")).card is None


async def test_only_managers_see_and_change_lore_and_numbers_must_exist(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    personalities = PersonalityService(sessionmaker, admin_ids=["900"])
    lore = LoreService(sessionmaker, personalities)
    await personalities.create("Owned", owner_id="1")
    await lore.add("owned", LoreChanges(keys=["k"], content="T"), actor="1")
    with pytest.raises(PermissionDeniedError):
        await lore.book("owned", actor="2")
    with pytest.raises(PermissionDeniedError):
        await lore.set_enabled("owned", 1, enabled=False, actor="2")
    assert len((await lore.book("owned", actor="900")).entries) == 1
    with pytest.raises(NotFoundError, match="There is no lore entry 2; the lore list shows"):
        await lore.edit("owned", 2, LoreChanges(content="x"), actor="1")
    with pytest.raises(InvalidInputError, match="Nothing to change"):
        await lore.edit("owned", 1, LoreChanges(), actor="1")
