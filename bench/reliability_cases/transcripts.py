"""How the bad-transcript cases import a transcript and judge what `personae import` did with it: the
lines they are built from, a refusal (one line naming the problem, nothing written) and a sane
acceptance (every message once, every exchange remembered once, nothing pending)."""

from __future__ import annotations

import json
from typing import Any

from bench.reliability_cases import Outcome, check
from bench.reliability_cases.common import figures, run_command
from bench.reliability_cases.lab import Lab

REFUSED = "refused in one line naming the problem; nothing written"
SANE = (
    "refused in one line with nothing written, or imported: every message once, every exchange "
    "remembered once"
)


def transcript_line(i: int, role: str = "user", **extra: Any) -> dict[str, Any]:
    """Line `i` of a transcript: a user's bike lock code, or the reply that notes it."""
    content = f"line {i}: my bike lock code is {1000 + i}" if role == "user" else f"noted, {1000 + i - 1}"
    return {"id": str(i), "role": role, "content": content, "user_id": "5001", **extra}


def good_lines(n: int = 4) -> list[dict[str, Any]]:
    """`n` well-formed lines, user and reply in turn."""
    return [transcript_line(i, "user" if i % 2 == 0 else "assistant") for i in range(n)]


async def import_transcript(
    lab: Lab, name: str, body: str | bytes, *argv: str
) -> tuple[int, str, str, dict[str, int]]:
    """Import `body` as `name`.jsonl into a personality of its own; what it said and what it wrote."""
    rt = lab.runtime
    personality, _ = await rt.personalities.create(f"tr-{name}")
    path = lab.workdir / f"{name}.jsonl"
    path.write_bytes(body if isinstance(body, bytes) else body.encode("utf-8", "surrogatepass"))
    code, out, err = await run_command(rt, "import", str(path), "--personality", personality.name, *argv)
    [written] = await lab.rows(
        "SELECT (SELECT count(*) FROM messages m JOIN conversations c ON c.id = m.conversation_id "
        "WHERE c.personality_id = :p) AS messages, "
        "(SELECT count(*) FROM messages m JOIN conversations c ON c.id = m.conversation_id "
        "WHERE c.personality_id = :p AND m.memory_processed_at IS NULL) AS pending, "
        "(SELECT count(*) FROM memories WHERE personality_id = :p) AS memories",
        p=personality.id,
    )
    return code, out, err, dict(written)


def jsonl(lines: list[Any]) -> str:
    return "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)


async def expect_refusal(lab: Lab, name: str, body: str | bytes, *argv: str, says: str = "line") -> Outcome:
    code, _, err, written = await import_transcript(lab, name, body, *argv)
    ok = code == 1 and says in err and "\n" not in err.strip() and written["messages"] == 0
    return check(ok, f"exit {code}: {err[:160]!r}; messages written: {written['messages']}")


async def expect_sane(
    lab: Lab, name: str, body: str | bytes, *argv: str, messages: int, exchanges: int
) -> Outcome:
    code, out, err, written = await import_transcript(lab, name, body, *argv)
    if code == 1:
        ok = "\n" not in err.strip() and written["messages"] == 0
        return check(ok, f"refused: {err[:160]!r}; messages written: {written['messages']}")
    ok = (
        code == 0
        and written["messages"] == messages
        and written["memories"] == exchanges
        and written["pending"] == 0
    )
    said = err[:160] if code else " / ".join(out.strip().splitlines()[:2])
    return check(
        ok,
        f"exit {code}: {said!r}; {written['messages']} messages, {written['memories']} memories, "
        f"{written['pending']} pending",
        figures(messages=written["messages"], memories=written["memories"]),
    )


def st_chat(*records: Any) -> str:
    """A SillyTavern chat file: its metadata line, then these records."""
    meta = {"user_name": "Ann", "character_name": "Seraphina", "create_date": "2026-11-22 @16h 50m 00s 000ms"}
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in (meta, *records))


def st_message(mes: str, is_user: bool, send_date: Any = "2026-11-22T16:51:00Z") -> dict[str, Any]:
    """One message of a SillyTavern chat, by Ann or by Seraphina."""
    return {"name": "Ann" if is_user else "Seraphina", "is_user": is_user, "send_date": send_date, "mes": mes}
