"""The shipped bot on a Discord of its own (testkit.fake_discord: a real HTTP server and gateway the bot
logs in to), on the area's runtime: catching up on what two users said while it was away, in a bound
channel and in one bound to nobody; a webhook Discord refuses with 400; a model that ignores max_tokens;
a stream that stops at its idle or its total deadline.

Each case has channels and a personality of its own (the area's cases share one database), and reads
back what users would see in Discord and what the log and the memories hold.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

from bench.reliability_cases import Outcome, Scale, case, check
from bench.reliability_cases.lab import Lab
from testkit.fake_discord import GUILD, FakeDiscord
from testkit.llm_server import Trickle

FIRST_USER = 401


@asynccontextmanager
async def _world(lab: Lab, *channels: tuple[int, bool]) -> AsyncIterator[FakeDiscord]:
    """A Discord with these (channel id, webhooks allowed) channels, no bot connected yet."""
    async with FakeDiscord() as world:
        for channel_id, webhooks in channels:
            world.add_channel(channel_id, name=f"c{channel_id}", webhooks=webhooks)
        yield world


async def _start(world: FakeDiscord, lab: Lab) -> None:
    from bot.client import PersonaeBot

    await world.start(PersonaeBot(runtime=lab.runtime))


async def _personality(lab: Lab, name: str, channel: int | None = None) -> int:
    personality, _ = await lab.runtime.personalities.create(name, prompt=f"You are {name}.")
    if channel is not None:
        await lab.runtime.bindings.bind(
            personality_id=personality.id, channel_id=str(channel), guild_id=str(GUILD), user_id="1"
        )
    return personality.id


async def _sources(lab: Lab, personality_id: int) -> dict[str, list[str]]:
    """Each user's remembered message ids (their memories' sources) for this personality."""
    by_user: dict[str, list[str]] = {}
    for memory in await lab.memories():
        if memory["personality_id"] == personality_id:
            by_user.setdefault(memory["user_id"], []).extend(memory["source_message_ids"])
    return by_user


async def _pending(lab: Lab, personality_id: int) -> int:
    return int(
        await lab.scalar(
            "SELECT count(*) FROM messages JOIN conversations c ON c.id = conversation_id "
            "WHERE c.personality_id = :p AND memory_processed_at IS NULL AND role = 'user'",
            p=personality_id,
        )
    )


@case(
    "discord",
    "catch-up-older-lines",
    did="bot stopped; in a bound channel each of N users says a line naming nobody, then one naming the "
    "personality (all within the reply window); bot started",
    expected="each user's newest line answered once; each user's memory holds both their lines and no "
    "one else's; every line gets its 📝; nothing pending",
)
async def catch_up_older_lines(lab: Lab, scale: Scale) -> Outcome:
    channel = 610
    users = [FIRST_USER + i for i in range(scale.pick(2, 6))]
    lab.chat_llm.responder = lambda body: "Noted."
    personality_id = await _personality(lab, "Echo", channel)
    async with _world(lab, (channel, False)) as world:
        await _start(world, lab)
        await world.say("Echo, good night.", user=FIRST_USER - 1, channel=channel)
        await world.stop()
        older = {
            u: world.said_while_away(f"my umbrella {u} is red", user=u, channel=channel, ago=timedelta(0))
            for u in users
        }
        newest = {
            u: world.said_while_away(
                f"Echo, my train {u} leaves at nine", user=u, channel=channel, ago=timedelta(0)
            )
            for u in users
        }
        before = len(world.sent_by_bot(channel))
        await _start(world, lab)
        replies = len(world.sent_by_bot(channel)) - before
        reacted = world.reacted()
        await world.stop()
    sources = await _sources(lab, personality_id)
    whole = sum(
        str(older[u].id) in sources.get(str(u), []) and str(newest[u].id) in sources.get(str(u), [])
        for u in users
    )
    mine = {str(u): {str(older[u].id), str(newest[u].id)} for u in users}
    foreign = sum(
        1
        for user, ids in sources.items()
        for i in ids
        if any(i in m for other, m in mine.items() if other != user)
    )
    marked = sum(m.id in reacted for m in [*older.values(), *newest.values()])
    pending = await _pending(lab, personality_id)
    ok = (
        replies == len(users)
        and whole == len(users)
        and foreign == 0
        and marked == 2 * len(users)
        and pending == 0
    )
    return check(
        ok,
        f"{replies} replies to {len(users)} users; {whole} users remember both lines; {foreign} lines in "
        f"another user's memory; {marked} of {2 * len(users)} lines with 📝; {pending} pending",
        f"users {len(users)}, replies {replies}, foreign {foreign}, pending {pending}",
    )


@case(
    "discord",
    "catch-up-unbound-channel",
    did="bot up, a line answered in one channel, bot stopped; in a channel bound to nobody a user says "
    "'Lilith, while you were away: my cat is called Pixel' (and a line naming nobody); bot started",
    expected="the line naming the personality is answered and remembered with its 📝, the other stays "
    "unstored; channels whose last message was read already are not fetched",
)
async def catch_up_unbound_channel(lab: Lab, scale: Scale) -> Outcome:
    talk, unbound, quiet = 620, 621, 622
    lab.chat_llm.responder = lambda body: "Pixel is a fine name."
    personality_id = await _personality(lab, "Lilith")
    async with _world(lab, (talk, False), (unbound, False), (quiet, False)) as world:
        world.said_while_away("nothing to see", channel=quiet, ago=timedelta(hours=1))
        await _start(world, lab)
        await world.say("Lilith, hello.", user=FIRST_USER, channel=talk)
        await world.stop()
        world.said_while_away("just chatting", user=FIRST_USER + 1, channel=unbound, ago=timedelta(0))
        cat = world.said_while_away(
            "Lilith, while you were away: my cat is called Pixel",
            user=FIRST_USER + 1,
            channel=unbound,
            ago=timedelta(0),
        )
        before = len(world.requests)
        await _start(world, lab)
        replies = len(world.sent_by_bot(unbound))
        read = sorted(
            {r.path for r in world.requests[before:] if r.method == "GET" and r.path.endswith("/messages")}
        )
        reacted = cat.id in world.reacted()
        await world.stop()
    remembered = str(cat.id) in (await _sources(lab, personality_id)).get(str(FIRST_USER + 1), [])
    stored = int(await lab.scalar("SELECT count(*) FROM messages WHERE content = 'just chatting'"))
    skipped = f"/channels/{quiet}/messages" not in read and f"/channels/{talk}/messages" not in read
    ok = replies == 1 and remembered and reacted and stored == 0 and skipped
    return check(
        ok,
        f"{replies} reply in the unbound channel; remembered: {remembered}, 📝: {reacted}; lines naming "
        f"nobody stored: {stored}; histories read: {read}",
    )


@case(
    "discord",
    "webhook-refused-400",
    did="a personality answers through the channel's webhook; Discord then refuses the webhook message "
    "with 400 (as for a name holding 'clyde' or 'discord')",
    expected="the reply comes as the bot's own message, the name in bold; stored and remembered once",
)
async def webhook_refused(lab: Lab, scale: Scale) -> Outcome:
    channel = 630
    lab.chat_llm.responder = lambda body: "Still here."
    personality_id = await _personality(lab, "Clio")
    async with _world(lab, (channel, True)) as world:
        await _start(world, lab)
        await world.say("Clio, one", user=FIRST_USER, channel=channel)
        world.fail("POST", r"/webhooks/\d+/[^/]+", 400, 50035, "Invalid Form Body")
        said = await world.say("Clio, two", user=FIRST_USER, channel=channel)
        last = world.sent_by_bot(channel)[-1]
        reacted = said.id in world.reacted()
        await world.stop()
    plain = last.webhook_id is None and last.content == "**Clio**\nStill here."
    remembered = str(said.id) in (await _sources(lab, personality_id)).get(str(FIRST_USER), [])
    return check(
        plain and remembered and reacted,
        f"the second reply as the bot: {plain} ({last.content[:40]!r}); remembered: {remembered}, "
        f"📝: {reacted}",
    )


@case(
    "discord",
    "reply-cap",
    did="the chat model ignores max_tokens and sends 200,000 characters",
    expected="at most REPLY_MAX_CHARS posted (a few Discord messages, not 100), ending with a note that "
    "it was cut; what was posted is what is stored",
)
async def reply_cap(lab: Lab, scale: Scale) -> Outcome:
    from memory.chat.service import REPLY_CUT_NOTE

    channel = 640
    lab.chat_llm.responder = lambda body: " ".join(f"word{i}" for i in range(20_000))
    await _personality(lab, "Talia")
    cap = lab.runtime.settings.reply_max_chars
    async with _world(lab, (channel, False)) as world:
        await _start(world, lab)
        await world.say("Talia, tell me everything.", user=FIRST_USER, channel=channel)
        parts = world.sent_by_bot(channel)
        await world.stop()
    text = "".join(p.content for p in parts).removeprefix("**Talia**\n")
    said_cut = text.endswith(REPLY_CUT_NOTE.format(limit=cap).strip())
    stored = int(
        await lab.scalar(
            "SELECT coalesce(sum(length(content)), 0) FROM messages WHERE author_id = 'personality:talia'"
        )
    )
    ok = len(text) <= cap and len(parts) <= cap // 1000 and said_cut
    return check(
        ok,
        f"{len(parts)} Discord messages, {len(text):,} characters (cap {cap:,}); says it was cut: "
        f"{said_cut}; {stored:,} characters stored",
        f"messages {len(parts)}, chars {len(text)}",
    )


async def _cut_stream(lab: Lab, name: str, channel: int, trickle: Trickle, words: int) -> Outcome:
    from memory.chat.service import CUT_REPLY

    lab.chat_llm.responder = lambda body: " ".join(f"part{i}" for i in range(words))
    personality_id = await _personality(lab, name)
    async with _world(lab, (channel, False)) as world:
        await _start(world, lab)
        lab.chat_llm.script(trickle)
        first = await world.say(f"{name}, a story please.", user=FIRST_USER, channel=channel)
        told = [m.content for m in world.sent_by_bot(channel)]
        lab.chat_llm.responder = lambda body: "Once upon a time."
        second = await world.say(f"{name}, try again?", user=FIRST_USER, channel=channel)
        await world.stop()
    half = int(
        await lab.scalar(
            "SELECT count(*) FROM messages WHERE author_id = :a AND content LIKE 'part0%'",
            a=f"personality:{name.lower()}",
        )
    )
    sources = (await _sources(lab, personality_id)).get(str(FIRST_USER), [])
    both = str(first.id) in sources and str(second.id) in sources
    ok = told[:1] == [f"**{name}**\n{CUT_REPLY}"] and half == 0 and both
    return check(
        ok,
        f"the user read {told[:1]!r}; half replies stored: {half}; after the next answer both lines "
        f"remembered: {both}",
    )


@case(
    "discord",
    "stream-idle-deadline",
    did="the chat model streams one word, then nothing (its idle deadline is the 1.5 s LLM timeout)",
    expected="the user is told in the channel that the answer was cut; no half reply posted or stored; "
    "the next answer takes the message into memory",
)
async def stream_idle(lab: Lab, scale: Scale) -> Outcome:
    return await _cut_stream(lab, "Ida", 650, Trickle(interval=30), words=5)


@case(
    "discord",
    "stream-total-deadline",
    did="the chat model streams a word every 0.5 s, never idle for long, never done (total deadline 2 x "
    "the 1.5 s LLM timeout)",
    expected="the user is told in the channel that the answer was cut; no half reply posted or stored; "
    "the next answer takes the message into memory",
)
async def stream_total(lab: Lab, scale: Scale) -> Outcome:
    return await _cut_stream(lab, "Tova", 660, Trickle(interval=0.5), words=100)
