"""What a user said incognito never becomes a memory, whoever forms it: the reply's own formation, a
later pass, a re-run, `personae worker`, an import. Real PostgreSQL, Qdrant Edge, the local embedder,
and the chat and summarizer LLMs over HTTP (the `runtime` the bot builds)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import delete, select, update

from bot.runtime import Runtime
from memory.conversations import LoggedMessage, Venue, ensure_conversation, store_messages
from memory.formation.forming import MemoryFormation
from memory.owners.incognito import IncognitoService
from memory.types import MessageRole
from models import Memory, Message, Personality
from testkit.chat import ReplyRecorder, chat_request
from testkit.imports import import_text
from testkit.llm_server import LLMTestServer

ALICE = "1001"  # the user `chat_request` speaks as
SECRET = "4921"


@pytest.fixture
async def sage(runtime: Runtime) -> Personality:
    # Summarized: the summarizer reads each exchange with the messages before it as context.
    personality, _ = await runtime.personalities.create("Sage", memory_mode="summarized")
    return personality


async def messages(runtime: Runtime) -> dict[str, Message]:
    async with runtime.sessionmaker() as session:
        return {m.external_id: m for m in (await session.scalars(select(Message))).all()}


async def memories(runtime: Runtime) -> list[Memory]:
    async with runtime.sessionmaker() as session:
        return list((await session.scalars(select(Memory).order_by(Memory.occurred_at))).all())


def memory_summarizer_inputs(llm_server: LLMTestServer) -> list[str]:
    """What the summarizer was asked to turn into memories (the rolling summary's requests left out)."""
    asked = [r["messages"][-1]["content"] for r in llm_server.requests if "summarizer" in r["model"]]
    return [text for text in asked if "<exchange" in text]


def chat_inputs(llm_server: LLMTestServer) -> list[str]:
    return [json.dumps(r["messages"]) for r in llm_server.requests if "chat" in r["model"]]


async def chat(runtime: Runtime, personality: Personality, message_id: str, text: str) -> list[str]:
    """Say `text` now, one chat turn; the ids it remembered."""
    request = chat_request(personality.id, text, message_id=message_id, created_at=datetime.now(UTC))
    turn = await runtime.chat.answer(request, ReplyRecorder(f"r-{message_id}"))
    assert turn.reply.ok and turn.after is not None  # answered as usual, incognito or not
    return turn.after.remembered_message_ids


async def test_a_chat_under_incognito_is_answered_and_never_remembered_nor_context_later(
    runtime: Runtime, sage: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "Noted, I will keep all of that in mind for our next talk."
    garden = "I planted tomatoes, basil and three kinds of peppers in the garden behind the old mill today."
    assert await chat(runtime, sage, "m0", garden) == ["m0"]

    await runtime.incognito.start(ALICE, sage.id, None)
    secret = f"Between us: my bank PIN is {SECRET} and the spare key is under the blue flowerpot by the door."
    assert await chat(runtime, sage, "m1", secret) == []  # so no 📝 either
    assert await chat(runtime, sage, "m1b", "And the safe's code is the same as the PIN.") == []
    stored = await messages(runtime)
    assert (stored["m1"].memory_excluded, stored["r-m1"].memory_excluded) == ("incognito", "incognito")
    assert stored["m1"].memory_processed_at is not None and stored["r-m1"].memory_processed_at is not None
    assert [m.source_message_ids for m in await memories(runtime)] == [["m0", "r-m0"]]
    assert await runtime.memory.pending_message_count(user_id=ALICE) == 0

    assert await runtime.incognito.stop(ALICE, None) == 1
    tea = "I have started drinking green tea every morning instead of coffee, and I sleep much better now."
    assert await chat(runtime, sage, "m2", tea) == ["m2"]
    assert [m.source_message_ids for m in await memories(runtime)] == [["m0", "r-m0"], ["m2", "r-m2"]]
    # The conversation kept its context: the model answering m2 saw the secret...
    assert SECRET in chat_inputs(llm_server)[-1]
    # ...but the summarizer forming m2's memory got the garden as context (the three messages before
    # it that are not excluded), never the secret.
    # (Asked first with its context: the canned answer, "I will keep...", is no summary and is asked
    # again alone.)
    asked = [i for i in memory_summarizer_inputs(llm_server) if "green tea" in i]
    assert "tomatoes" in asked[0] and "<context>" in asked[0] and SECRET not in asked[0]
    assert SECRET not in " ".join(memory_summarizer_inputs(llm_server))
    assert all(SECRET not in m.content + (m.content_verbatim or "") for m in await memories(runtime))


def jsonl(lines: list[dict[str, Any]]) -> str:
    return "\n".join(json.dumps(line) for line in lines)


def transcript(start: datetime) -> list[dict[str, Any]]:
    """Three exchanges of Alice's, ten minutes apart from `start`, the middle one holding the secret."""
    texts = ["I planted tomatoes.", f"My PIN is {SECRET}.", "The tomatoes are red now."]
    lines = []
    for i, text in enumerate(texts):
        at = start + timedelta(minutes=10 * i)
        lines.append(
            {"id": f"u{i}", "role": "user", "content": text, "timestamp": at.isoformat(), "user_id": ALICE}
        )
        lines.append(
            {
                "id": f"r{i}",
                "role": "assistant",
                "content": f"Sage heard: {text}",
                "timestamp": (at + timedelta(minutes=1)).isoformat(),
                "reply_to": f"u{i}",
            }
        )
    return lines


async def test_an_import_of_lines_said_in_a_span_forms_none_of_them_even_on_a_rerun(
    runtime: Runtime, sage: Personality
) -> None:
    """Import goes through the same log: a transcript line Alice said while incognito (a channel log of
    those very messages, say) is excluded like the live message was."""
    start = datetime.now(UTC) - timedelta(hours=2)
    # Incognito with Sage from 5 to 15 minutes after `start`: the second exchange only.
    clock = IncognitoService(runtime.sessionmaker, clock=lambda: start + timedelta(minutes=5))
    await clock.start(ALICE, sage.id, timedelta(minutes=10))

    report = await import_text(runtime, sage, jsonl(transcript(start)))
    assert (report.formation.memories, report.formation.excluded) == (2, 2)
    assert [m.source_message_ids for m in await memories(runtime)] == [["u0", "r0"], ["u2", "r2"]]
    stored = await messages(runtime)
    assert {i for i, m in stored.items() if m.memory_excluded} == {"u1", "r1"}
    assert all(m.memory_processed_at is not None for m in stored.values())

    # A re-run from scratch (every message pending again, the memories gone) forms the same two.
    async with runtime.sessionmaker.begin() as session:
        await session.execute(update(Message).values(memory_processed_at=None))
        await session.execute(delete(Memory))
    again = await runtime.memory.form_pending()
    assert (again.memories, again.excluded) == (2, 2)
    assert SECRET not in " ".join(m.content + (m.content_verbatim or "") for m in await memories(runtime))
    # And importing the same file again stores nothing new and forms nothing.
    assert (await import_text(runtime, sage, jsonl(transcript(start)))).formation.memories == 0


async def test_a_worker_forms_nothing_said_incognito(runtime: Runtime, sage: Personality) -> None:
    start = datetime.now(UTC) - timedelta(hours=2)
    clock = IncognitoService(runtime.sessionmaker, clock=lambda: start + timedelta(minutes=5))
    await clock.start(ALICE, None, timedelta(minutes=10))  # every personality
    # Stored the way every path stores (catch-up, a bot that died before forming), left to the worker.
    said = [
        LoggedMessage(
            line["id"],
            ALICE if line["role"] == "user" else "personality:sage",
            None,
            MessageRole(line["role"]),
            line["content"],
            datetime.fromisoformat(line["timestamp"]),
            reply_to=line.get("reply_to"),
        )
        for line in transcript(start)
    ]
    async with runtime.sessionmaker.begin() as session:
        conversation = await ensure_conversation(session, sage.id, Venue(None, None, ALICE))
        await store_messages(session, conversation, said)
    stop = asyncio.Event()
    passes = []
    real_pass = MemoryFormation.form_pending

    async def one_pass(formation: MemoryFormation, **kwargs: Any) -> Any:
        report = await real_pass(formation, **kwargs)
        passes.append(report)
        stop.set()  # the worker ends after this pass
        return report

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(MemoryFormation, "form_pending", one_pass)
        await runtime.memory.run_worker(idle_seconds=0.01, stop=stop)
    [report] = passes
    assert (report.memories, report.excluded) == (2, 2)
    assert [m.source_message_ids for m in await memories(runtime)] == [["u0", "r0"], ["u2", "r2"]]
    assert await runtime.memory.pending_message_count() == 0


async def test_a_message_excluded_after_its_reply_was_stored_takes_the_reply_out_too(
    runtime: Runtime, sage: Personality, llm_server: LLMTestServer
) -> None:
    """An exclusion set on the user message alone (as "Forget this" may, before formation): its reply
    holds its words, so it is in no memory and no memory's context either."""
    llm_server.responder = lambda body: "Understood, I have written all of that down for you."
    start = datetime.now(UTC) - timedelta(hours=1)
    texts = [
        "I planted tomatoes, basil and three kinds of peppers in the garden behind the old mill today.",
        f"The alarm code for the old mill is {SECRET}, in case you ever need to get in at night.",
        "I have started drinking green tea every morning instead of coffee, and I sleep much better.",
    ]
    said = []
    for i, text in enumerate(texts):
        at = start + timedelta(minutes=i)
        said.append(LoggedMessage(f"u{i}", ALICE, "Alice", MessageRole.USER, text, at))
        answer = (
            f"I will remember: {text}"
            if i == 1
            else "Understood, I will keep all of that in mind for our next talk, thank you for telling me."
        )
        said.append(LoggedMessage(f"r{i}", "sage", None, MessageRole.ASSISTANT, answer, at, reply_to=f"u{i}"))
    async with runtime.sessionmaker.begin() as session:
        conversation = await ensure_conversation(session, sage.id, Venue(None, None, ALICE))
        await store_messages(session, conversation, said[:4])
        await session.execute(
            update(Message).where(Message.external_id == "u1").values(memory_excluded="forgotten")
        )
    first = await runtime.memory.form_pending()
    assert (first.memories, first.excluded) == (1, 2)
    # The next exchange comes in a later pass: the left-out reply is only a message before it now.
    async with runtime.sessionmaker.begin() as session:
        await store_messages(session, conversation, said[4:])
    assert (await runtime.memory.form_pending()).memories == 1
    assert [m.source_message_ids for m in await memories(runtime)] == [["u0", "r0"], ["u2", "r2"]]
    first_asked = next(i for i in memory_summarizer_inputs(llm_server) if "green tea" in i)
    assert "tomatoes" in first_asked and SECRET not in first_asked
