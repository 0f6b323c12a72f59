"""Answers placed, copied or cut as a real small model did (issue 30), through the importer on the runtime
the bot builds: whatever the model answers, no stored memory holds another exchange's content, is cut
mid-sentence, carries formatting or prompt tags, or states a fact its exchange does not hold
(testkit/summary_audit.py reads each memory against the transcript)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select

from bot.runtime import Runtime
from memory.formation.summarizer import STRICT_RULE
from memory.transfer.service import ImportReport
from memory.transfer.transcript import read_transcript as read_lines
from models import Memory, Personality
from testkit.llm_server import LLMTestServer, SummarizerModel, exchanges_asked
from testkit.summary_audit import audit_memories, read_transcript, stored_memories

ROOT = Path(__file__).resolve().parents[3]
SAGE = ROOT / "examples" / "sage.jsonl"
TWO_USERS = ROOT / "bench" / "data" / "two_user_channel.jsonl"
MODEL = "openai/test-summarizer"
# What each mode's wrong answers are refused as (the model's text kept where an answer was right).
REFUSED_AS = {
    "shifted": {"off_exchange", "invented", "other_user", "misattributed"},
    "repeated": {"off_exchange", "invented", "other_user", "misattributed"},
    "merged": set(),  # longer than its exchange: cut to its fact-dense sentences, or refused
    "context": {"off_exchange", "invented", "other_user", "misattributed"},
    "copies": set(),  # cleaned like the input, then kept within its cap
    "rambles": set(),  # cut back to its last whole sentence
    "tags": {"off_exchange"},
    "tells_other": {"invented", "other_user", "off_exchange", "misattributed"},
    "states_question": {"misattributed"},  # what was asked, stated as a fact
    "adds_event": {"invented", "off_exchange"},  # an event nobody said, with no name or number
}


async def _import(runtime: Runtime, path: Path, name: str = "Sage") -> tuple[ImportReport, Personality]:
    personality, _ = await runtime.personalities.create(name, memory_mode="summarized")
    assert isinstance(personality, Personality)
    lines, skipped = read_lines(path)
    report = await runtime.transfer.import_transcript(
        lines,
        personality=personality,
        default_user_id=None,
        skipped_lines=skipped,
    )
    return report, personality


async def _numbered_before(runtime: Runtime, llm_server: LLMTestServer, folder: Path) -> None:
    """The model numbers a batch first, as in a bot that formed a larger chat earlier: a pass of a few
    exchanges is asked one a call by a model never seen to (memory.formation.pace), and these sets'
    passes are of two to six exchanges, which the wrong answers below must reach in numbered batches."""
    llm_server.responder = SummarizerModel("faithful")
    said = folder / "earlier.jsonl"
    with said.open("w", encoding="utf-8") as out:
        for n in range(16):
            common = {"user_id": "3001", "timestamp": f"2024-01-01T10:{n:02d}:00Z"}
            told = f"I have {n} cats now, and every one of them sleeps on the green sofa by the window."
            out.write(json.dumps({"id": f"e{n}", "role": "user", "content": told, **common}))
            answer = f"{n} cats on one green sofa! The window seat must be the warmest place in the flat."
            reply = {"id": f"r{n}", "role": "assistant", "content": answer, "reply_to": f"e{n}"}
            out.write("\n" + json.dumps({**reply, "timestamp": common["timestamp"]}) + "\n")
    await _import(runtime, said, "Earlier")
    assert any(len(exchanges_asked(r)) > 1 for r in llm_server.requests), "the earlier chat was not batched"
    llm_server.reset()


@pytest.mark.parametrize("path", [SAGE, TWO_USERS], ids=["sage", "two-users"])
@pytest.mark.parametrize("mode", SummarizerModel.REAL_MODES)
async def test_no_memory_is_wrong_whatever_the_answers(
    runtime: Runtime, llm_server: LLMTestServer, mode: str, path: Path, tmp_path: Path
) -> None:
    await _numbered_before(runtime, llm_server, tmp_path)
    llm_server.responder = SummarizerModel(mode, stubborn=False)
    llm_server.cut_at_max_tokens = True
    report, sage = await _import(runtime, path)
    async with runtime.sessionmaker() as session:
        rows = (
            await session.scalars(
                select(Memory).where(Memory.personality_id == sage.id).order_by(Memory.occurred_at)
            )
        ).all()
    audit = audit_memories(stored_memories(rows), read_transcript(path, "Sage"), model=MODEL)
    assert audit.findings == [], "\n".join(audit.findings)
    # The wrong answers were seen as wrong, not passed by luck: refused for what they did.
    assert set(report.formation.fallbacks) - {"not_smaller"} <= REFUSED_AS[mode] | {"unparseable", "cut"}, (
        report.formation.fallback_details
    )
    batches = [r for r in llm_server.requests if len(exchanges_asked(r)) > 1]
    assert batches, "no numbered batch was asked"
    # The two-user channel asks no question: a model stating questions has none to state there.
    asks = any("?" in line.content for line in read_transcript(path, "Sage").values())
    if REFUSED_AS[mode] and (asks or mode != "states_question"):
        # The wrong answers were seen as wrong, not passed by luck: each asked again alone, where the
        # model (told strictly) answers right, and its text is used.
        retried = [r for r in llm_server.requests if STRICT_RULE in str(r["messages"][0]["content"])]
        assert retried and all(len(exchanges_asked(r)) == 1 for r in retried)
    assert audit.by_model > 0
