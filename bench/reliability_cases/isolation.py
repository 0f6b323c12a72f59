"""Isolation: randomized users, personalities, guilds and DMs, some users letting their DM memories be
recalled in guilds, some memories forgotten; then many recalls and every user's export.

Each message carries a codeword of its own, so wherever text ends up its origin is known: whose it
was, with which personality, in which venue, and whether it was forgotten.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from bench.reliability_cases import Outcome, Scale, case, check
from bench.reliability_cases.common import chat_turn, figures, request
from bench.reliability_cases.lab import Lab

CODEWORD_PREFIX = "cw"


@dataclass(frozen=True, slots=True)
class Said:
    user: str
    personality: int
    guild: str | None  # None: a DM


def codewords(text: str) -> list[str]:
    return [w.strip(".,!?") for w in text.split() if w.startswith(CODEWORD_PREFIX)]


@case(
    "isolation",
    "randomized-recall-and-export",
    did="users x personalities x (guild channels and DMs) chatting through ChatService with memories "
    "formed after each reply; a random third of users allow DM recall in guilds (globally or for one "
    "personality); a fifth of memories forgotten; then random recalls, each for another message's "
    "codeword, from every kind of venue; then each user's /memory export",
    expected="0 recalls across users or personalities, 0 DM memories in guilds unless allowed, 0 "
    "memories of another guild, forgotten memories recalled 0 times, exports hold only the caller's",
)
async def randomized(lab: Lab, scale: Scale) -> Outcome:
    rng = random.Random(scale.seed)
    rt = lab.runtime
    users = [str(4000 + i) for i in range(scale.pick(4, 8))]
    personalities = []
    for name in ("Iris", "Orin", "Vega")[: scale.pick(2, 3)]:
        created, _ = await rt.personalities.create(f"iso-{name.lower()}", display_name=name)
        personalities.append(created.id)
    guilds = [f"95{i}" for i in range(scale.pick(2, 3))]
    allowed: set[tuple[str, int]] = set()
    for user in users:
        choice = rng.random()
        if choice < 0.15:
            await rt.user_settings.update(user, None, allow_dm_recall_in_guilds=True)
            allowed.update((user, p) for p in personalities)
        elif choice < 0.33:
            personality = rng.choice(personalities)
            await rt.user_settings.update(user, personality, allow_dm_recall_in_guilds=True)
            allowed.add((user, personality))

    said: dict[str, Said] = {}
    turns = scale.pick(40, 400)
    for _ in range(turns):
        user, personality = rng.choice(users), rng.choice(personalities)
        guild = rng.choice([*guilds, None])
        word = f"{CODEWORD_PREFIX}{rng.randrange(10**9):09d}"
        said[word] = Said(user, personality, guild)
        text = f"Please remember that my codeword is {word} and nothing else."
        req = request(personality, user, text, guild_id=guild, channel_id=f"ch{guild}" if guild else None)
        reply = await chat_turn(rt.chat, req)
        if reply.ok:
            await rt.chat.after_reply(
                await lab.scalar(
                    "SELECT conversation_id FROM messages WHERE external_id = :i", i=req.message_id
                )
            )
    await rt.memory.form_pending()

    forgotten: set[str] = set()
    for word in rng.sample(sorted(said), len(said) // 5):
        rows = await lab.rows(
            "SELECT id, user_id, content, content_verbatim FROM memories "
            "WHERE content LIKE :w AND state <> 'deleted'",
            w=f"%{word}%",
        )
        for row in rows:
            await rt.memory.forget(user_id=row["user_id"], memory_ids=[row["id"]])
            forgotten.update(codewords(row["content"] + " " + (row["content_verbatim"] or "")))

    cross = dm_leaks = other_guild = revived = recalled = 0
    queries = scale.pick(100, 1500)
    words = sorted(said)
    for _ in range(queries):
        user, personality = rng.choice(users), rng.choice(personalities)
        guild = rng.choice([*guilds, None])
        target = rng.choice(words)
        memories = await rt.memory.recall(
            personality_id=personality, user_id=user, query=f"codeword {target}", guild_id=guild, limit=5
        )
        for memory in memories:
            recalled += 1
            for word in set(codewords(memory.content + " " + (memory.content_verbatim or ""))):
                origin = said[word]
                cross += origin.user != user or origin.personality != personality
                revived += word in forgotten
                if guild is not None and origin.guild is None:
                    dm_leaks += (user, personality) not in allowed
                elif guild is not None and origin.guild != guild:
                    other_guild += 1

    foreign_in_exports = 0
    exported = 0
    for user in users:
        for line in await rt.transfer.export_lines(user_id=user):
            record = json.loads(line)
            exported += 1
            owner = record.get("user_id")
            words_here = codewords(json.dumps(record, ensure_ascii=False))
            foreign_in_exports += (
                (owner is not None and owner != user)
                + sum(said[w].user != user for w in words_here if w in said)
                + sum(w in forgotten for w in words_here)
            )
    ok = cross == 0 and dm_leaks == 0 and other_guild == 0 and revived == 0 and foreign_in_exports == 0
    return check(
        ok,
        f"{queries} recalls returned {recalled} memories: {cross} of another user or personality, "
        f"{dm_leaks} DM memories in a guild without consent, {other_guild} of another guild, {revived} "
        f"forgotten; {exported} export lines, {foreign_in_exports} of someone else or forgotten",
        figures(
            users=len(users),
            personalities=len(personalities),
            guilds=len(guilds),
            messages=len(said),
            forgotten=len(forgotten),
            dm_recall_allowed_pairs=len(allowed),
        ),
    )
