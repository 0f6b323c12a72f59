"""Identities that collide: transcripts reusing message ids in one channel, a DM beside a guild line that
names no channel, one channel id in two guilds, a file imported twice or a line repeated.

Each runs `personae import` and `personae recall` through the CLI's own handlers on the area's runtime.
A message's identity must never let one author's line stand for another's: a collision is refused in
one line with nothing of the file written, never dropped, linked or recalled across users or venues.
"""

from __future__ import annotations

import json
from typing import Any

from bench.reliability_cases import Outcome, Scale, case, check
from bench.reliability_cases.common import run_command
from bench.reliability_cases.lab import Lab

ALICE_PIN = "my bank PIN is 4921"
BOB_BOOK = "Bob, Dune is great"


async def _personality(lab: Lab, name: str) -> str:
    await lab.runtime.personalities.create(name)
    return name


async def _import(lab: Lab, personality: str, name: str, *lines: dict[str, Any]) -> tuple[int, str, str]:
    path = lab.workdir / f"{name}.jsonl"
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    return await run_command(lab.runtime, "import", str(path), "--personality", personality)


async def _recall(lab: Lab, personality: str, query: str, user: str, guild: str | None = None) -> list[str]:
    where = ("--guild", guild) if guild else ()
    code, out, err = await run_command(
        lab.runtime, "recall", query, "--personality", personality, "--user", user, "--json", *where
    )
    if code:
        raise AssertionError(f"recall failed: {err}")
    return [m["content"] for m in json.loads(out)["memories"]]


async def _count(lab: Lab, personality: str, table: str) -> int:
    join = "JOIN conversations c ON c.id = t.conversation_id" if table == "messages" else ""
    column = "c.personality_id" if table == "messages" else "t.personality_id"
    return int(
        await lab.scalar(
            f"SELECT count(*) FROM {table} t {join} JOIN personalities p ON p.id = {column} "
            "WHERE p.name = :n",
            n=personality,
        )
    )


WHERE = {"guild_id": "G", "channel_id": "C"}
ALICE_FILE = (
    {"id": "1", "role": "user", "content": ALICE_PIN, "user_id": "A", **WHERE},
    {"id": "2", "role": "assistant", "content": "Noted, Alice.", "reply_to": "1", **WHERE},
)


@case(
    "collisions",
    "reused-ids-one-channel",
    did="issue 20 item 1: file A (Alice, guild G, channel C, ids 1/2, her PIN), then file B (Bob, same G "
    "and C, ids 1/3, 'Bob, Dune is great'); then B again with ids of its own",
    expected="B refused in one line naming the line and the fix, nothing of it written; Alice's recall in "
    "G holds no line of Bob's, Bob's none of Alice's; B with its own ids imports as Bob's",
)
async def reused_ids_one_channel(lab: Lab, scale: Scale) -> Outcome:
    p = await _personality(lab, "coll-reused")
    first = await _import(lab, p, "alice", *ALICE_FILE)
    bob = [
        {"id": "1", "role": "user", "content": "what is a good book?", "user_id": "B", **WHERE},
        {"id": "3", "role": "assistant", "content": BOB_BOOK, "reply_to": "1", **WHERE},
    ]
    refused = await _import(lab, p, "bob", *bob)
    written = await _count(lab, p, "messages")
    # Each side asked for the other's words and for its own: the case is about whose memory holds
    # what, so each query names what it looks for (with the lab's hash embeddings, recall's relevance
    # floor, issue 31, returns nothing for a memory holding one word of a three-word list).
    alice_after_b = await _recall(lab, p, "Dune book", "A", "G")
    bob_after_b = await _recall(lab, p, "Dune book", "B", "G") + await _recall(lab, p, "bank PIN", "B", "G")
    renamed = await _import(
        lab, p, "bob2", *({**line, "id": f"b-{line['id']}", "reply_to": "b-1"} for line in bob)
    )
    alice = await _recall(lab, p, "Dune book", "A", "G")
    bob_now = await _recall(lab, p, "Dune book", "B", "G") + await _recall(lab, p, "bank PIN", "B", "G")
    ok = (
        first[0] == 0
        and refused[0] == 1
        and "line 1" in refused[2]
        and "ids of their own" in refused[2]
        and written == 2
        and not any("Dune" in m for m in alice_after_b + alice)
        and bob_after_b == []
        and renamed[0] == 0
        and any("Dune" in m for m in bob_now)
        and not any("4921" in m for m in bob_now)
    )
    return check(
        ok,
        f"B: exit {refused[0]}, {refused[2]!r}; messages after B: {written}; Alice's recall in G after B: "
        f"{alice_after_b!r}; Bob's: {bob_after_b!r}; B with ids of its own: exit {renamed[0]}, Bob's recall "
        f"{bob_now!r}, Alice's {alice!r}",
    )


@case(
    "collisions",
    "reused-reply-id",
    did="file A as above, then Bob's file whose user line has an id of its own but whose reply reuses "
    "Alice's reply id 2 (other words, answering Bob)",
    expected="refused in one line naming the line; Bob's line is not left waiting for a reply that is "
    "Alice's, nothing of the file written",
)
async def reused_reply_id(lab: Lab, scale: Scale) -> Outcome:
    p = await _personality(lab, "coll-reply")
    await _import(lab, p, "alice", *ALICE_FILE)
    code, _, err = await _import(
        lab,
        p,
        "bob",
        {"id": "b1", "role": "user", "content": "what is a good book?", "user_id": "B", **WHERE},
        {"id": "2", "role": "assistant", "content": BOB_BOOK, "reply_to": "b1", **WHERE},
    )
    written = await _count(lab, p, "messages")
    ok = code == 1 and "line 2" in err and "\n" not in err and written == 2
    return check(ok, f"exit {code}: {err!r}; messages written in all: {written}")


@case(
    "collisions",
    "same-file-twice-and-a-repeated-line",
    did="a transcript imported twice; then one that repeats a line word for word (a copy-paste), and one "
    "that gives an id to two different lines",
    expected="the second import stores and forms nothing; the repeated line is stored once and its "
    "exchange remembered once; two different lines under one id are refused in one line",
)
async def same_file_twice(lab: Lab, scale: Scale) -> Outcome:
    p = await _personality(lab, "coll-twice")
    first = await _import(lab, p, "alice", *ALICE_FILE)
    again = await _import(lab, p, "alice", *ALICE_FILE)
    q = await _personality(lab, "coll-repeat")
    line = {"id": "r1", "role": "user", "content": "my locker is 12", "user_id": "A"}
    repeated = await _import(
        lab,
        q,
        "repeat",
        line,
        line,
        {"id": "r2", "role": "assistant", "content": "12, noted", "reply_to": "r1"},
    )
    stored = (await _count(lab, q, "messages"), await _count(lab, q, "memories"))
    r = await _personality(lab, "coll-two-lines")
    clash = await _import(
        lab,
        r,
        "clash",
        line,
        {**line, "content": "my locker is 13"},
        {"id": "r2", "role": "assistant", "content": "ok"},
    )
    ok = (
        first[0] == 0
        and again[0] == 0
        and "(0 new)" in again[1]
        and "memories stored: 0" in again[1]
        and repeated[0] == 0
        and stored == (2, 1)
        and clash[0] == 1
        and "line 2" in clash[2]
        and await _count(lab, r, "messages") == 0
    )
    return check(
        ok,
        f"again: exit {again[0]}, {again[1].splitlines()[:3]!r}; repeated line: exit {repeated[0]}, "
        f"{stored[0]} messages and {stored[1]} memory; two lines under one id: exit {clash[0]}, {clash[2]!r}",
    )


@case(
    "collisions",
    "dm-after-a-guild-line-without-channel",
    did="issue 20 item 2: a transcript line with guild_id G1 and no channel_id, then a DM transcript of the "
    "same user with a secret; recall of the secret in G1 and in a DM",
    expected="the DM's memory is never recalled in G1 (0 times), it is recalled in the DM; the guild "
    "line's memory is recalled in G1",
)
async def dm_after_guild_line(lab: Lab, scale: Scale) -> Outcome:
    p = await _personality(lab, "coll-dm")
    guild = await _import(
        lab,
        p,
        "guild",
        {"id": "g1", "role": "user", "content": "hello everyone", "user_id": "42", "guild_id": "G1"},
        {"id": "g2", "role": "assistant", "content": "hello there", "guild_id": "G1"},
    )
    dm = await _import(
        lab,
        p,
        "dm",
        {"id": "d1", "role": "user", "content": "my secret diagnosis is asthma", "user_id": "42"},
        {"id": "d2", "role": "assistant", "content": "I will keep your secret"},
    )
    in_guild = await _recall(lab, p, "secret diagnosis asthma", "42", "G1")
    in_dm = await _recall(lab, p, "secret diagnosis asthma", "42")
    guild_line = await _recall(lab, p, "hello everyone", "42", "G1")
    leaked = sum("asthma" in m for m in in_guild)
    ok = (
        guild[0] == dm[0] == 0
        and leaked == 0
        and any("asthma" in m for m in in_dm)
        and any("hello everyone" in m for m in guild_line)
    )
    return check(
        ok,
        f"imports exit {guild[0]}, {dm[0]}; the DM secret recalled in G1 {leaked} times, in the DM "
        f"{sum('asthma' in m for m in in_dm)}; the guild line recalled in G1: "
        f"{any('hello everyone' in m for m in guild_line)}",
    )


@case(
    "collisions",
    "one-channel-id-in-two-guilds",
    did="two transcripts of one user in channel '55' of guild G1 and of guild G2 (transcripts' ids are "
    "anyone's), then recalls in each guild",
    expected="each guild's memory is recalled in its own guild only: 0 memories of G1 in G2 or of G2 in G1",
)
async def one_channel_two_guilds(lab: Lab, scale: Scale) -> Outcome:
    p = await _personality(lab, "coll-guilds")
    for guild, secret in (("G1", "the G1 vault code is 1111"), ("G2", "the G2 vault code is 2222")):
        where = {"guild_id": guild, "channel_id": "55"}
        await _import(
            lab,
            p,
            guild,
            {"id": f"{guild}-u", "role": "user", "content": secret, "user_id": "42", **where},
            {"id": f"{guild}-a", "role": "assistant", "content": "noted", **where},
        )
    in_g1 = await _recall(lab, p, "vault code", "42", "G1")
    in_g2 = await _recall(lab, p, "vault code", "42", "G2")
    crossed = sum("2222" in m for m in in_g1) + sum("1111" in m for m in in_g2)
    ok = crossed == 0 and any("1111" in m for m in in_g1) and any("2222" in m for m in in_g2)
    return check(ok, f"recalled across guilds: {crossed}; in G1: {in_g1!r}; in G2: {in_g2!r}")
