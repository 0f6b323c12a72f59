"""Bad transcripts for `personae import`: malformed, over-size, unknown roles, duplicate ids, odd
timestamps, a reply before any user line, text the database cannot hold.

Each runs the CLI's own import handler on the area's runtime (the 1 GB file runs `personae import` in a
subprocess). A refusal must be one line naming the problem with nothing written; an acceptance must
store every message once and remember every exchange once, leaving nothing pending.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from bench.reliability_cases import Outcome, Scale, case, check
from bench.reliability_cases.common import figures, run_command
from bench.reliability_cases.lab import CliResult, Lab

# The command's own peak is VmHWM, which starts afresh with the new program: ru_maxrss is carried
# across exec, so it would report the forking parent's size (the test suite's own process, past 1 GiB
# late in a full run) rather than the command's.
_REPORTS_ITS_PEAK = """
import sys
from bot.cli import main
status = main(sys.argv[1:])
with open("/proc/self/status") as own:
    peak = next(line.split()[1] for line in own if line.startswith("VmHWM:"))
print(f"peak-kib {peak}", file=sys.stderr)
sys.exit(status)
"""

REFUSED = "refused in one line naming the problem; nothing written"
SANE = (
    "refused in one line with nothing written, or imported: every message once, every exchange "
    "remembered once"
)
GIB = 1 << 30


def _line(i: int, role: str = "user", **extra: Any) -> dict[str, Any]:
    content = f"line {i}: my bike lock code is {1000 + i}" if role == "user" else f"noted, {1000 + i - 1}"
    return {"id": str(i), "role": role, "content": content, "user_id": "5001", **extra}


def _good(n: int = 4) -> list[dict[str, Any]]:
    return [_line(i, "user" if i % 2 == 0 else "assistant") for i in range(n)]


async def _import(lab: Lab, name: str, body: str | bytes, *argv: str) -> tuple[int, str, str, dict[str, int]]:
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


def _jsonl(lines: list[Any]) -> str:
    return "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)


async def expect_refusal(lab: Lab, name: str, body: str | bytes, *argv: str, says: str = "line") -> Outcome:
    code, _, err, written = await _import(lab, name, body, *argv)
    ok = code == 1 and says in err and "\n" not in err.strip() and written["messages"] == 0
    return check(ok, f"exit {code}: {err[:160]!r}; messages written: {written['messages']}")


async def expect_sane(
    lab: Lab, name: str, body: str | bytes, *argv: str, messages: int, exchanges: int
) -> Outcome:
    code, out, err, written = await _import(lab, name, body, *argv)
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


def _refusal_case(name: str, did: str, body: str | bytes, *argv: str, says: str = "line") -> None:
    async def run(lab: Lab, scale: Scale) -> Outcome:
        return await expect_refusal(lab, name, body, *argv, says=says)

    case("bad-transcripts", name, did=did, expected=REFUSED)(run)


def _sane_case(
    name: str, did: str, body: str, *argv: str, messages: int, exchanges: int, expected: str = SANE
) -> None:
    async def run(lab: Lab, scale: Scale) -> Outcome:
        return await expect_sane(lab, name, body, *argv, messages=messages, exchanges=exchanges)

    case("bad-transcripts", name, did=did, expected=expected)(run)


_refusal_case(
    "malformed-json",
    "a transcript whose third line is cut mid-object",
    _jsonl([*_good(2), '{"id": "9", "role": "us']),
)
_refusal_case(
    "not-an-object", "a transcript whose second line is a JSON array", _jsonl([_good(1)[0], "[1, 2, 3]"])
)
_refusal_case("unknown-role", "a line with role 'narrator'", _jsonl([*_good(2), _line(2, "narrator")]))
_refusal_case("duplicate-ids", "two lines with the same id", _jsonl([*_good(2), _line(0, "user")]))
_refusal_case(
    "unparsable-timestamp",
    "a line with timestamp 'last tuesday-ish'",
    _jsonl([_line(0, timestamp="last tuesday-ish"), _line(1, "assistant")]),
)
_refusal_case(
    "missing-content", "a line without its content", _jsonl([{"id": "0", "role": "user", "user_id": "5001"}])
)
_refusal_case(
    "wrong-types", "a line whose content is a number", _jsonl([{"id": "0", "role": "user", "content": 42}])
)
_refusal_case(
    "not-utf8",
    "a transcript in Latin-1 with accented bytes",
    ('{"id": "0", "role": "user", "content": "caf\xe9"}\n').encode("latin-1"),
    says="UTF-8",
)


_sane_case(
    "future-timestamps",
    "a transcript dated in the year 2999",
    _jsonl([{**line, "timestamp": f"2999-01-01T00:00:0{i}Z"} for i, line in enumerate(_good(4))]),
    messages=4,
    exchanges=2,
)
_sane_case(
    "reply-before-user",
    "a transcript that opens with an assistant line, then a user line and its reply (with --user)",
    _jsonl([_line(9, "assistant"), *_good(2)]),
    "--user",
    "5001",
    messages=3,
    exchanges=1,
    expected="imported; the opening reply belongs to nobody's memory, the exchange after it is "
    "remembered once, nothing pending",
)


@case(
    "bad-transcripts",
    "empty-file",
    did="an empty transcript and one of blank lines",
    expected="imported as nothing: exit 0, 0 messages, no error",
)
async def empty_file(lab: Lab, scale: Scale) -> Outcome:
    first = await expect_sane(lab, "empty", "", messages=0, exchanges=0)
    second = await expect_sane(lab, "blank", "\n  \n\n", messages=0, exchanges=0)
    return check(first.ok and second.ok, f"empty: {first.happened}; blank lines: {second.happened}")


_sane_case(
    "nul-and-surrogates",
    "lines whose content holds a NUL (\\u0000) and a lone surrogate (\\ud800), JSON-escaped",
    '{"id": "0", "role": "user", "content": "a\\u0000b", "user_id": "5001"}\n'
    '{"id": "1", "role": "assistant", "content": "half \\ud800 here"}\n',
    messages=2,
    exchanges=1,
    expected="imported with those characters removed or replaced; every exchange remembered once; "
    "no traceback",
)


@case(
    "bad-transcripts",
    "one-gigabyte",
    did="`personae import` (a subprocess) of a 1 GiB transcript (a sparse file: nothing is written to disk)",
    expected="refused early in one line that names the size, without reading the file (peak memory "
    "under the file's size)",
)
async def one_gigabyte(lab: Lab, scale: Scale) -> Outcome:
    path = lab.workdir / "huge.jsonl"
    with path.open("wb") as sparse:
        sparse.truncate(GIB)
    await lab.runtime.personalities.create("huge")
    # The command's own peak memory, reported by the process itself (see _REPORTS_ITS_PEAK).
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _REPORTS_ITS_PEAK,
        *("import", str(path), "--personality", "huge", "--user", "1"),
        env=lab.environ(personae_data_dir=lab.workdir / "cli-data"),
        cwd=lab.workdir,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, err = await process.communicate()
    os.unlink(path)
    lines = err.decode(errors="replace").splitlines()
    peak_kib = next((int(line.split()[1]) for line in lines if line.startswith("peak-kib ")), GIB)
    result = CliResult(
        process.returncode or 0, stdout.decode(), "\n".join(x for x in lines if not x.startswith("peak-kib "))
    )
    peak = f"{peak_kib // 1024} MiB"
    said = result.one_line()
    ok = (
        result.code == 1
        and not result.traceback
        and peak_kib < GIB // 1024  # reading the file whole would take at least its size
        and any(word in said.lower() for word in ("size", "large", "big", "gb", "gib", "mb"))
    )
    return check(
        ok, f"exit {result.code}: {said[:160]!r}; peak memory {peak}", figures(file_gib=1, peak_memory=peak)
    )
