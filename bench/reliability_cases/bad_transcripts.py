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
from bench.reliability_cases.transcripts import (
    REFUSED,
    SANE,
    expect_refusal,
    expect_sane,
    good_lines,
    import_transcript,
    jsonl,
    st_chat,
    st_message,
    transcript_line,
)

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

GIB = 1 << 30


# The cases are registered here, not in the transcripts module: a case belongs to the module that
# defines it (all_cases orders the table so).
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
    jsonl([*good_lines(2), '{"id": "9", "role": "us']),
)
_refusal_case(
    "not-an-object", "a transcript whose second line is a JSON array", jsonl([good_lines(1)[0], "[1, 2, 3]"])
)
_refusal_case(
    "unknown-role", "a line with role 'narrator'", jsonl([*good_lines(2), transcript_line(2, "narrator")])
)
_refusal_case(
    "unparsable-timestamp",
    "a line with timestamp 'last tuesday-ish'",
    jsonl([transcript_line(0, timestamp="last tuesday-ish"), transcript_line(1, "assistant")]),
)
_refusal_case(
    "missing-content", "a line without its content", jsonl([{"id": "0", "role": "user", "user_id": "5001"}])
)
_refusal_case(
    "wrong-types", "a line whose content is a number", jsonl([{"id": "0", "role": "user", "content": 42}])
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
    jsonl([{**line, "timestamp": f"2999-01-01T00:00:0{i}Z"} for i, line in enumerate(good_lines(4))]),
    messages=4,
    exchanges=2,
)
_sane_case(
    "reply-before-user",
    "a transcript that opens with an assistant line, then a user line and its reply (with --user)",
    jsonl([transcript_line(9, "assistant"), *good_lines(2)]),
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


# ------------------------------------------------------------------ issue 20: what the probe found, and what
# every field of a line can hold besides

OUT_OF_RANGE = ("9999-12-31T23:59:59-12:00", "0001-01-01T00:00:00+14:00")


@case(
    "bad-transcripts",
    "out-of-range-timestamps",
    did="issue 20 item 11: a line dated 9999-12-31T23:59:59-12:00, and one dated 0001-01-01T00:00:00+14:00 "
    "(each a valid ISO-8601 time past year 9999, or before year 1, in UTC)",
    expected=REFUSED,
)
async def out_of_range_timestamps(lab: Lab, scale: Scale) -> Outcome:
    said = []
    ok = True
    for i, moment in enumerate(OUT_OF_RANGE):
        outcome = await expect_refusal(
            lab,
            f"range-{i}",
            jsonl([transcript_line(0, timestamp=moment), transcript_line(1, "assistant")]),
            says="out of range",
        )
        ok = ok and outcome.ok
        said.append(outcome.happened)
    return check(ok, "; ".join(said))


_sane_case(
    "edge-of-range-timestamps",
    "lines dated 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z (the first and last moments PostgreSQL "
    "and Python share)",
    jsonl(
        [
            transcript_line(0, timestamp="0001-01-01T00:00:00Z"),
            transcript_line(1, "assistant", timestamp="0001-01-01T00:00:01Z"),
            transcript_line(2, timestamp="9999-12-31T23:59:58Z"),
            transcript_line(3, "assistant", timestamp="9999-12-31T23:59:59Z"),
        ]
    ),
    messages=4,
    exchanges=2,
)
_refusal_case(
    "nested-100000-deep",
    "issue 20 item 12: a line whose JSON nests 100,000 arrays deep (in a key the importer ignores)",
    jsonl(
        [
            good_lines(1)[0],
            '{"id": "9", "role": "user", "content": "x", "n": ' + "[" * 100_000 + "]" * 100_000 + "}",
        ]
    ),
    says="nested too deeply",
)
_refusal_case(
    "number-of-5000-digits",
    "a line whose id is an integer of 5,000 digits (past Python's limit on converting one)",
    jsonl(['{"id": ' + "7" * 5000 + ', "role": "user", "content": "x", "user_id": "5001"}']),
    says="digits",
)
_sane_case(
    "byte-order-mark",
    "issue 20 item 17: a transcript starting with a UTF-8 byte order mark (what Notepad saves)",
    "\ufeff" + jsonl(good_lines(4)),
    messages=4,
    exchanges=2,
)
_sane_case(
    "raw-line-separators",
    "issue 20 item 3: words holding U+2028, U+2029 and U+0085 raw (valid JSON, what an export and "
    "JSON.stringify write), with CRLF line ends",
    "".join(
        json.dumps({**line, "content": line["content"] + " \u2028 \u2029 \u0085 end"}, ensure_ascii=False)
        + "\r\n"
        for line in good_lines(4)
    ),
    messages=4,
    exchanges=2,
)
_sane_case(
    "repeated-line",
    "a transcript that repeats one line word for word (pasted twice)",
    jsonl([*good_lines(2), good_lines(2)[1], *good_lines(4)[2:]]),
    messages=4,
    exchanges=2,
    expected="imported: the repeated line stored once (it is the same message), every exchange "
    "remembered once, nothing pending",
)
_refusal_case(
    "same-id-other-words",
    "two lines with one id and different words (two messages given one id)",
    jsonl([*good_lines(2), {**transcript_line(0, "user"), "content": "something else entirely"}]),
)


def _field_refusal(name: str, did: str, **fields: Any) -> None:
    _refusal_case(name, did, jsonl([transcript_line(0), {**transcript_line(1, "assistant"), **fields}]))


_field_refusal("id-a-float", "a line whose id is 1.5", id=1.5)
_field_refusal("id-an-object", "a line whose id is an object", id={"id": 1})
_field_refusal("id-with-nul", "a line whose id holds a NUL (\\u0000)", id="a\u0000b")
_field_refusal("id-too-long", "a line whose id is 65 characters", id="x" * 65)
_field_refusal(
    "user-id-lone-surrogate", "a line whose user_id is a lone surrogate (\\udc80)", user_id="\udc80"
)
_field_refusal("channel-id-a-list", "a line whose channel_id is a list", channel_id=["55"])
_field_refusal("guild-id-a-boolean", "a line whose guild_id is true", guild_id=True)
_field_refusal("author-an-object", "a line whose author is an object", author={"name": "Ann"})
_field_refusal("author-too-long", "a line whose author is 65 characters", author="A" * 65)
_field_refusal(
    "timestamp-a-number", "a line whose timestamp is epoch seconds (1700000000)", timestamp=1700000000
)
_field_refusal("content-null", "a line whose content is null", content=None)
_field_refusal("role-missing", "a line without a role", role=None)
_field_refusal("reply-to-a-later-line", "a reply whose reply_to names a line after it", reply_to="7")
_field_refusal("reply-to-a-reply", "a reply whose reply_to names a reply", reply_to="1")
_refusal_case("a-null-line", "a line that is JSON null", jsonl([*good_lines(2), "null"]))
_refusal_case("a-number-line", "a line that is the JSON number 42", jsonl([*good_lines(2), "42"]))
_refusal_case(
    "personality-when-several",
    "lines naming two personalities, imported with --personality",
    jsonl(
        [{**transcript_line(0), "personality": "a"}, {**transcript_line(1, "assistant"), "personality": "b"}]
    ),
)


@case(
    "bad-transcripts",
    "personality-unknown",
    did="`personae import` without --personality of lines naming a personality that does not exist, and "
    "of lines naming none",
    expected=REFUSED,
)
async def personality_unknown(lab: Lab, scale: Scale) -> Outcome:
    rt = lab.runtime
    said, ok = [], True
    marked = [{**line, "content": f"no personality here {i}"} for i, line in enumerate(good_lines(2))]
    for name, lines in (
        ("named-nobody", [{**line, "personality": "nobody"} for line in marked]),
        ("named-none", marked),
    ):
        path = lab.workdir / f"{name}.jsonl"
        path.write_text(jsonl(lines), encoding="utf-8")
        code, _, err = await run_command(rt, "import", str(path))
        ok = ok and code == 1 and "line 1" in err and "\n" not in err.strip()
        said.append(f"exit {code}: {err!r}")
    written = int(await lab.scalar("SELECT count(*) FROM messages WHERE content LIKE 'no personality here%'"))
    return check(ok and written == 0, "; ".join(said) + f"; messages written: {written}")


@case(
    "bad-transcripts",
    "not-a-file",
    did="`personae import` of a path that does not exist, and of a directory",
    expected="refused in one line naming the path; nothing written",
)
async def not_a_file(lab: Lab, scale: Scale) -> Outcome:
    rt = lab.runtime
    personality, _ = await rt.personalities.create("tr-not-a-file")
    said = []
    for path in (lab.workdir / "missing.jsonl", lab.workdir):
        code, _, err = await run_command(rt, "import", str(path), "--personality", personality.name)
        said.append((code, err))
    ok = all(code == 1 and "\n" not in err.strip() and "Traceback" not in err for code, err in said)
    return check(ok, "; ".join(f"exit {code}: {err!r}" for code, err in said))


async def _st_import(lab: Lab, name: str, body: str) -> tuple[int, str, str, dict[str, int]]:
    return await import_transcript(lab, name, body, "--format", "sillytavern", "--user", "5001")


@case(
    "bad-transcripts",
    "sillytavern-what-its-files-hold",
    did="issue 20 items 11 and 17 for SillyTavern chats: a message holding a raw U+2028 (what "
    "JSON.stringify writes), a chat with a byte order mark, a send_date of 9999-12-31T23:59:59-12:00, "
    "and a line nested 100,000 deep",
    expected="the first three imported, every exchange once (the date out of range takes the time before "
    "it, as SillyTavern's undated lines do); the deep line refused in one line; no traceback",
)
async def sillytavern_files(lab: Lab, scale: Scale) -> Outcome:
    bodies = {
        "st-u2028": st_chat(
            st_message("line one\u2028line two", True), st_message("both lines, noted", False)
        ),
        "st-bom": "\ufeff" + st_chat(st_message("hello", True), st_message("hi Ann", False)),
        "st-range": st_chat(st_message("hello", True), st_message("hi Ann", False, OUT_OF_RANGE[0])),
    }
    said, ok = [], True
    for name, body in bodies.items():
        code, _, err, written = await _st_import(lab, name, body)
        good = code == 0 and written == {"messages": 2, "pending": 0, "memories": 1}
        ok = ok and good
        said.append(f"{name}: exit {code}{' ' + err[:120] if code else ''}, {written}")
    code, _, err, written = await _st_import(
        lab, "st-deep", st_chat(st_message("x", True)) + "[" * 100_000 + "]" * 100_000
    )
    ok = ok and code == 1 and "nested too deeply" in err and written["messages"] == 0
    said.append(f"deep: exit {code}: {err.strip()!r}")
    return check(ok, "; ".join(said))
