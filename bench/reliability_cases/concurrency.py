"""Concurrency in a shared channel: many users talking to one bound personality at once, the model
answering in whatever order its calls finish; every memory must be one user's own exchange."""

from __future__ import annotations

import asyncio
import itertools
import random

from bench.reliability_cases import Outcome, Scale, case, check
from bench.reliability_cases.common import (
    chat_turn,
    count_by,
    figures,
    request,
    run_command,
    snowflake,
    tag,
    tags_in,
)
from bench.reliability_cases.lab import ADMIN_ID, Lab
from memory.chat.service import ChatRequest
from testkit.llm_server import Stall

USERS = 8
NAMES = ("Ana", "Ben", "Chloe", "Dev", "Eitan", "Fay", "Gus", "Hiro")
GUILD, CHANNEL = "7001", "5501"


@case(
    "concurrency",
    "shared-channel",
    did=f"{USERS} users x N messages (each user about one per 2 s) into one bound guild channel, each turn "
    "through ChatService.answer (store, prompt, generate, record, form) as the chat cog runs it; "
    "the chat model answers each after a random 0-400 ms, so replies finish out of order",
    expected="each memory holds only its own user's message(s) and the replies to them: "
    "0 cross-user contents, 0 lost, 0 duplicated, nothing left pending",
)
async def shared_channel(lab: Lab, scale: Scale) -> Outcome:
    per_user = scale.pick(3, 25)
    rt = lab.runtime
    rng = random.Random(scale.seed)
    personality, _ = await rt.personalities.create("lilith-shared", display_name="Lilith")
    await rt.bindings.bind(
        personality_id=personality.id, channel_id=CHANNEL, guild_id=GUILD, user_id=ADMIN_ID
    )
    total = USERS * per_user
    lab.chat_llm.script(*[Stall(rng.uniform(0.0, 0.4)) for _ in range(total)])

    # Each user writes about every two seconds (within the flood control's 5 per 10 s), all at once:
    # turns of different users overlap throughout, and replies finish out of order.
    window = per_user * 2.0
    arrivals = sorted(
        (rng.uniform(0.0, window), user, index) for user in range(USERS) for index in range(per_user)
    )
    finished: list[tuple[int, int]] = []
    unrouted = 0
    notices = 0

    async def turn(delay: float, user: int, index: int) -> None:
        nonlocal unrouted, notices
        await asyncio.sleep(delay)
        text = f"Lilith, please note {tag(1, user, index)} for me. I will ask about it later."
        route = await rt.chat.route(text, channel_ids=[CHANNEL])
        if route is None:
            unrouted += 1
            return
        req: ChatRequest = request(
            route.personality.id,
            f"{100 + user}",
            text,
            user_name=NAMES[user],
            guild_id=GUILD,
            channel_id=CHANNEL,
            message_id=snowflake(),  # taken at arrival: ids increase in the order messages arrive
        )
        reply = await chat_turn(rt.chat, req)
        if not reply.ok:
            notices += 1
            return
        finished.append((user, index))

    await asyncio.gather(*(turn(*arrival) for arrival in arrivals))
    await rt.memory.form_pending()  # the catch-up pass the bot runs on a timer

    memories = [m for m in await lab.memories() if m["personality_id"] == personality.id]
    cross = 0
    unanswered_in_memory = 0
    seen: list[tuple[int, int, str]] = []  # (user, index, speaker) per line
    example = ""
    for memory in memories:
        owner = int(memory["user_id"]) - 100
        asked: set[tuple[int, int]] = set()
        answered: set[tuple[int, int]] = set()
        for line in memory["content"].splitlines():
            speaker = "reply" if line.startswith("Lilith:") else "user"
            for _, user, index in tags_in(line):
                seen.append((user, index, speaker))
                cross += user != owner
                (answered if speaker == "reply" else asked).add((user, index))
        # A reply in a memory must answer a message of that memory, and every message there be answered.
        if asked ^ answered and not example:
            example = " / ".join(memory["content"].splitlines())[:300]
        unanswered_in_memory += len(asked ^ answered)
    counts = count_by(seen)
    lost = sum(
        1
        for user, index in finished
        for speaker in ("user", "reply")
        if counts.get((user, index, speaker), 0) == 0
    )
    duplicated = sum(n - 1 for n in counts.values() if n > 1)
    pending = await lab.pending_messages()
    out_of_order = sum(1 for a, b in itertools.pairwise(finished) if a[0] != b[0])
    ok = (
        cross == 0
        and lost == 0
        and duplicated == 0
        and unanswered_in_memory == 0
        and pending == 0
        and len(finished) == total
    )
    return check(
        ok,
        f"{len(finished)}/{total} answered, {len(memories)} memories: {cross} cross-user lines, "
        f"{lost} lost lines, {duplicated} duplicated lines, {unanswered_in_memory} message/reply "
        f"mismatches, {pending} messages pending" + (f"; e.g. {example!r}" if example else ""),
        figures(
            users=USERS,
            messages=total,
            memories=len(memories),
            cross_user=cross,
            lost=lost,
            duplicated=duplicated,
            interleavings=out_of_order,
            peak_chat_calls=lab.chat_llm.max_in_flight,
            unrouted=unrouted,
            notices=notices,
        ),
    )


ISSUE_TRANSCRIPT = [
    {
        "id": "1",
        "role": "user",
        "content": "Lilith, my bank PIN is 4921, remember it",
        "user_id": "A",
        "author": "Alice",
    },
    {"id": "2", "role": "user", "content": "Lilith, what's a good book?", "user_id": "B", "author": "Bob"},
    {"id": "3", "role": "assistant", "content": "Alice, I'll remember your PIN 4921.", "reply_to": "1"},
    {"id": "4", "role": "assistant", "content": "Bob, try Dune.", "reply_to": "2"},
]


@case(
    "concurrency",
    "interleaved-transcript",
    did="`personae import` of the issue's two-user channel transcript (replies in finishing order, each "
    "with reply_to), then `personae recall PIN --user B` and `--user A`",
    expected="Alice: one memory with her PIN and the reply to her; Bob: one with his question and Dune; "
    "recall of PIN for Bob returns nothing",
)
async def interleaved_transcript(lab: Lab, scale: Scale) -> Outcome:
    import json

    rt = lab.runtime
    await rt.personalities.create("lilith-import", display_name="Lilith (imported)")
    path = lab.workdir / "issue9.jsonl"
    venue = {"channel_id": "55", "guild_id": "7", "timestamp": "2025-03-01T10:00:00Z"}
    path.write_text("".join(json.dumps({**line, **venue}) + "\n" for line in ISSUE_TRANSCRIPT))
    code, _, err = await run_command(rt, "import", str(path), "--personality", "lilith-import")
    rows = await lab.rows(
        "SELECT user_id, content FROM memories m JOIN personalities p ON p.id = m.personality_id "
        "WHERE p.name = 'lilith-import' ORDER BY user_id"
    )
    by_user = {user: [r["content"] for r in rows if r["user_id"] == user] for user in ("A", "B")}
    alice, bob = by_user["A"], by_user["B"]
    alice_ok = len(alice) == 1 and "4921" in alice[0] and "Dune" not in alice[0] and "book" not in alice[0]
    bob_ok = len(bob) == 1 and "Dune" in bob[0] and "4921" not in bob[0]
    _, bob_recall, _ = await run_command(
        rt, "recall", "PIN", "--personality", "lilith-import", "--user", "B", "--guild", "7", "--json"
    )
    leaked = "4921" in bob_recall
    ok = code == 0 and alice_ok and bob_ok and not leaked
    return check(
        ok,
        f"import exit {code}{' ' + err if err else ''}; Alice's memories {alice!r}; Bob's {bob!r}; "
        f"Bob's recall of PIN shows the PIN: {leaked}",
    )
