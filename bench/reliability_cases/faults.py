"""LLM faults during chat and during memory formation: timeouts, 429 with Retry-After, 500, a refused
connection, a stream cut mid-reply, a dropped connection, empty or template-token-only output, output
longer than its input, a summary in the wrong language.

Every message must stay stored, every exchange be remembered exactly once (by the model, extractively,
or by a later pass), and a user whose reply failed must be told something short and clear.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from bench.reliability_cases import Outcome, Scale, case, check
from bench.reliability_cases.common import (
    chat_turn,
    figures,
    is_clear_notice,
    memory_text,
    request,
    snowflake,
)
from bench.reliability_cases.cut_stream import CUT_MARKER, CutStreamServer
from bench.reliability_cases.lab import ADMIN_ID, Lab
from testkit.llm_server import Behaviour, Drop, Fail, Reply, Stall

KEY_ENV = "PERSONAE_RELIABILITY_TEST_KEY"
STALL = 3.0  # seconds; the faults lab's LLM timeout is 1.5
FACTS = ("Marguerite", "4921", "Lisbon")
EXCHANGE = (
    "Lilith, my cousin Marguerite is moving to Lisbon next spring and her new flat is number 4921 on "
    "the long street by the river. I promised to help her pack the books, the plants and the old "
    "piano, and I am a little worried about the piano because it is heavy and very old."
)


async def _personality(lab: Lab, name: str, *, mode: str = "verbatim", config_url: str | None = None) -> int:
    rt = lab.runtime
    config_id = None
    if config_url is not None:
        os.environ[KEY_ENV] = "test"
        config = await rt.llm_configs.add(
            f"{name}-model",
            model="openai/test-chat",
            actor=ADMIN_ID,
            api_base=config_url,
            api_key_env=KEY_ENV,
            timeout=1.5,
        )
        config_id = config.id
    personality, _ = await rt.personalities.create(name, memory_mode=mode, llm_config_id=config_id)
    return personality.id


async def _remembered_once(lab: Lab, personality_id: int, texts: Sequence[str]) -> tuple[bool, str]:
    """Whether each text is in exactly one memory of the personality and nothing of it waits."""
    memories = [m for m in await lab.memories() if m["personality_id"] == personality_id]
    counts = [sum(1 for m in memories if t in memory_text(m)) for t in texts]
    pending = int(
        await lab.scalar(
            "SELECT count(*) FROM messages JOIN conversations c ON c.id = conversation_id "
            "WHERE c.personality_id = :p AND memory_processed_at IS NULL",
            p=personality_id,
        )
    )
    return all(n == 1 for n in counts) and pending == 0, f"in memories {counts}, {pending} pending"


async def chat_fault(
    lab: Lab,
    name: str,
    script: Sequence[Behaviour] = (),
    *,
    expect_reply: bool = False,
    config_url: str | None = None,
    first_text: str = "Lilith, what should I cook tonight? Something warm please.",
    first_key: str = "cook tonight",
    down: bool = False,
) -> Outcome:
    """One message under the fault (`down`: the chat model's server closed), then one more once the
    model is fine; both remembered once."""
    rt = lab.runtime
    personality_id = await _personality(lab, name, config_url=config_url)
    user = snowflake()
    lab.chat_llm.script(*script)
    if down:
        await lab.chat_llm.close()
    first = request(personality_id, user, first_text)
    started = time.perf_counter()
    reply = await chat_turn(rt.chat, first)
    waited = time.perf_counter() - started
    if down:
        await lab.chat_llm.start()
    second = request(personality_id, user, "And tomorrow, a salad with lemons?")
    follow = await chat_turn(rt.chat, second)
    conversation = await lab.scalar(
        "SELECT conversation_id FROM messages WHERE external_id = :i", i=first.message_id
    )
    await rt.chat.after_reply(conversation)
    stored = int(
        await lab.scalar(
            "SELECT count(*) FROM messages WHERE external_id IN (:a, :b)",
            a=first.message_id,
            b=second.message_id,
        )
    )
    remembered, how = await _remembered_once(lab, personality_id, [first_key, "salad with lemons"])
    told = reply.ok if expect_reply else (not reply.ok and is_clear_notice(reply.text))
    ok = told and follow.ok and stored == 2 and remembered
    said = reply.text if not reply.ok else f"a reply ({len(reply.text)} chars)"
    return check(
        ok,
        f"user got {said!r}; both messages stored: {stored == 2}; remembered once: {how}",
        figures(first_reply_s=f"{waited:.1f}", chat_calls=len(lab.chat_llm.requests)),
    )


async def formation_fault(
    lab: Lab,
    name: str,
    script: Sequence[Behaviour] = (),
    *,
    down: bool = False,
) -> Outcome:
    """An exchange of a summarized personality formed while the summarizer misbehaves (`down`: its
    server, the embedding endpoint too, closed), then the catch-up pass: one memory, its facts kept,
    never longer than the exchange."""
    rt = lab.runtime
    personality_id = await _personality(lab, name, mode="summarized")
    # Queued now: the summarizer's calls are the next ones this server gets, from the turn's formation.
    lab.llm.script(*script)
    if down:
        await lab.llm.close()
    req = request(personality_id, snowflake(), EXCHANGE)
    reply = await chat_turn(rt.chat, req)
    conversation = await lab.scalar(
        "SELECT conversation_id FROM messages WHERE external_id = :i", i=req.message_id
    )
    pending = await rt.memory.pending_message_count(personality_id=personality_id)
    first_pass = "formed" if not pending else "left pending"
    if down:
        await lab.llm.start()
    await rt.memory.form_pending(conversation_id=conversation)  # the bot's catch-up pass
    memories = [m for m in await lab.memories() if m["personality_id"] == personality_id]
    remembered, how = await _remembered_once(lab, personality_id, ["Marguerite"])
    facts_kept = all(all(f in memory_text(m) for f in FACTS) for m in memories)
    rows = await lab.rows(
        "SELECT summarizer, length(content) AS chars, source_chars, content_verbatim IS NOT NULL AS kept "
        "FROM memories WHERE personality_id = :p",
        p=personality_id,
    )
    shorter = all(r["chars"] <= r["source_chars"] for r in rows)
    ok = reply.ok and remembered and facts_kept and shorter and len(memories) == 1
    by = ", ".join(f"{r['summarizer']} ({r['chars']} of {r['source_chars']} chars)" for r in rows) or "none"
    return check(
        ok,
        f"first pass {first_pass}; {len(memories)} memory: {by}; facts kept: {facts_kept}; {how}",
        figures(
            summarizer_calls=sum(1 for r in lab.llm.requests if "messages" in r),
            verbatim_kept=any(r["kept"] for r in rows),
        ),
    )


def _fault_case(
    fault: Callable[..., Awaitable[Outcome]],
    name: str,
    did: str,
    *script: Behaviour,
    expected: str,
    **options: Any,
) -> None:
    """Register `faults/NAME`: `fault` (chat_fault or formation_fault) with the server playing `script`."""

    async def run(lab: Lab, scale: Scale) -> Outcome:
        return await fault(lab, name, script, **options)

    case("faults", name, did=did, expected=expected)(run)


CHAT_EXPECTED = (
    "message stored; the user gets a short clear notice; once the model is back both messages remembered once"
)

_fault_case(
    chat_fault,
    "chat-timeout",
    "chat model stalls past the timeout on every attempt",
    Stall(STALL),
    Stall(STALL),
    expected=CHAT_EXPECTED,
)
_fault_case(
    chat_fault,
    "chat-429-retry-after",
    "chat model answers 429 with Retry-After: 1 once, then normally",
    Fail(429, retry_after=1.0),
    expected="the call is retried after the wait; the user gets the reply; both messages remembered once",
    expect_reply=True,
)
_fault_case(
    chat_fault,
    "chat-500",
    "chat model answers 500 on every attempt",
    Fail(500),
    Fail(500),
    expected=CHAT_EXPECTED,
)
_fault_case(
    chat_fault,
    "chat-refused",
    "chat model's port closed (connection refused), reopened after",
    expected=CHAT_EXPECTED,
    down=True,
)
_fault_case(
    chat_fault,
    "chat-dropped",
    "chat model drops the connection without answering, every attempt",
    Drop(),
    Drop(),
    expected=CHAT_EXPECTED,
)


@case(
    "faults",
    "chat-stream-cut",
    did="chat model's stream is cut after two chunks (an endpoint of its own, via an LLM config)",
    expected=CHAT_EXPECTED + "; no half reply stored",
)
async def chat_stream_cut(lab: Lab, scale: Scale) -> Outcome:
    async with CutStreamServer() as server:
        outcome = await chat_fault(
            lab,
            "chat-stream-cut",
            config_url=server.base_url,
            first_text=f"Lilith, tell me about pianos {CUT_MARKER}.",
            first_key="about pianos",
        )
    half = int(await lab.scalar("SELECT count(*) FROM messages WHERE content LIKE 'Let me tell you%'"))
    return check(
        outcome.ok and half == 0, outcome.happened + f"; half replies stored: {half}", outcome.figures
    )


_fault_case(chat_fault, "chat-empty", "chat model answers an empty text", Reply(""), expected=CHAT_EXPECTED)
_fault_case(
    chat_fault,
    "chat-template-only",
    "chat model answers only chat-template tokens",
    Reply("<|im_start|>assistant\n<|im_end|><|eot_id|>"),
    expected=CHAT_EXPECTED,
)

FORM_EXPECTED = (
    "exchange remembered exactly once (model, extractive or a later pass), its facts kept, never "
    "longer than the exchange"
)

_fault_case(
    formation_fault,
    "form-timeout",
    "summarizer stalls past the timeout on every attempt",
    Stall(STALL),
    Stall(STALL),
    expected=FORM_EXPECTED,
)
_fault_case(
    formation_fault,
    "form-429-retry-after",
    "summarizer answers 429 with Retry-After: 1 once",
    Fail(429, retry_after=1.0),
    expected=FORM_EXPECTED,
)
_fault_case(
    formation_fault,
    "form-500",
    "summarizer answers 500 on every attempt",
    Fail(500),
    Fail(500),
    expected=FORM_EXPECTED,
)
_fault_case(
    formation_fault,
    "form-refused",
    "summarizer and embedding endpoint down (connection refused) during formation, back for the catch-up",
    expected=FORM_EXPECTED,
    down=True,
)
_fault_case(
    formation_fault, "form-dropped", "summarizer drops the connection once", Drop(), expected=FORM_EXPECTED
)
_fault_case(
    formation_fault, "form-empty", "summarizer answers an empty text", Reply(""), expected=FORM_EXPECTED
)
_fault_case(
    formation_fault,
    "form-template-only",
    "summarizer answers only chat-template tokens",
    Reply("<|im_start|>assistant<|im_end|>"),
    expected=FORM_EXPECTED,
)
_fault_case(
    formation_fault,
    "form-longer-than-input",
    "summarizer answers three times the exchange's length",
    Reply(" ".join([EXCHANGE] * 3)),
    expected=FORM_EXPECTED,
)
_fault_case(
    formation_fault,
    "form-wrong-language",
    "summarizer answers in French, dropping the names and numbers",
    Reply("L'utilisateur parle du déménagement de sa cousine."),
    expected=FORM_EXPECTED,
)
