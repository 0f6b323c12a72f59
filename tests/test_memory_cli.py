"""The memory CLI contract (import, recall --json, stats, reindex --check) on the sample chats,
run in-process through `main()` against a scratch database and a fresh embedded index."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.cli.demo import EXAMPLES_DIR
from testkit.cli import run

SAGE = EXAMPLES_DIR / "sage.jsonl"


def user_message_ids(path: Path, user_id: str) -> set[str]:
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {line["id"] for line in lines if line.get("user_id") == user_id}


def test_import_recall_stats_reindex(cli_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "personality", "create", "Sage", "--memory-mode", "summarized")[0] == 0

    code, out, err = run(capsys, "import", str(SAGE), "--personality", "sage")
    assert code == 0, err
    assert "messages read:   25 (25 new)" in out
    assert "memories stored: 12" in out

    code, out, _ = run(capsys, "import", str(SAGE), "--personality", "sage")
    assert code == 0
    assert "(0 new)" in out and "memories stored: 0" in out  # a second import adds nothing

    code, out, _ = run(
        capsys,
        "recall",
        "what is my bonsai called",
        "--personality",
        "sage",
        "--user",
        "1002",
        "--json",
        "--limit",
        "3",
    )
    assert code == 0
    result = json.loads(out)
    assert result["query"] == "what is my bonsai called"
    first = result["memories"][0]
    assert set(first) == {
        "id",
        "score",
        "content",
        "content_verbatim",
        "source_message_ids",
        "occurred_at",
        "context",
    }
    assert "Gerald" in (first["content"] + (first["content_verbatim"] or ""))
    bob = user_message_ids(SAGE, "1002")
    for memory in result["memories"]:  # only Bob's own exchanges
        assert bob & set(memory["source_message_ids"])

    queries = cli_env / "queries.txt"
    queries.write_text("bonsai Gerald\n\nPlot #17\n")
    code, out, _ = run(
        capsys, "recall", "--queries-file", str(queries), "--personality", "sage", "--user", "1001", "--json"
    )
    answers = [json.loads(line) for line in out.splitlines()]
    assert [a["query"] for a in answers] == ["bonsai Gerald", "Plot #17"]
    alice = user_message_ids(SAGE, "1001")
    for answer in answers:
        for memory in answer["memories"]:
            assert alice & set(memory["source_message_ids"])  # never Bob's bonsai
    assert any("Plot #17" in m["content"] for m in answers[1]["memories"])

    code, out, _ = run(capsys, "memory", "stats", "--personality", "sage")
    assert code == 0
    assert "summarized" in out and "total" in out and "pending: 0 messages" in out

    code, out, _ = run(capsys, "reindex", "--check")
    assert code == 0 and "no drift" in out


def test_recall_json_carries_a_hits_context_after_its_own_words(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A hit's `content` and `source_message_ids` are what the chat prompt gets of it: its own first,
    then the exchanges said just around it, which `context` names."""
    run(capsys, "personality", "create", "Ivy")
    topics = ["my garden", "Zephyrine's wedding", "the dress I wore"]
    lines = []
    for n, topic in enumerate(topics):
        said = f"Let me tell you about {topic}"
        lines.append({"id": f"u{n}", "role": "user", "content": said, "user_id": "7"})
        lines.append({"id": f"a{n}", "role": "assistant", "content": "Tell me more!", "reply_to": f"u{n}"})
    transcript = cli_env / "ivy.jsonl"
    transcript.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert run(capsys, "import", str(transcript), "--personality", "ivy")[0] == 0

    _, out, _ = run(
        capsys, "recall", "Zephyrine wedding", "--personality", "ivy", "--user", "7", "--limit", "1", "--json"
    )
    [best] = json.loads(out)["memories"]
    assert best["content"].startswith("User: Let me tell you about Zephyrine's wedding")
    assert "my garden" in best["content"] and "the dress I wore" in best["content"]
    assert [c["source_message_ids"] for c in best["context"]] == [["u0", "a0"], ["u2", "a2"]]
    assert best["source_message_ids"] == ["u1", "a1", "u0", "a0", "u2", "a2"]


def test_malformed_file_writes_nothing(cli_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, "personality", "create", "Sage")
    bad = cli_env / "bad.jsonl"
    bad.write_text(
        '{"id": "1", "role": "user", "content": "hi", "user_id": "7"}\n'
        '{"id": "2", "role": "assistant", "content": "hello"}\n'
        '{"id": "3", "role": "narrator", "content": "???"}\n'
    )
    code, out, err = run(capsys, "import", str(bad), "--personality", "sage")
    assert code == 1
    assert err.strip() == 'personae: Line 3: \'role\' must be "user" or "assistant".'
    code, out, _ = run(capsys, "memory", "stats")
    assert "pending: 0 messages" in out and "total" in out
    assert " 0 " in out.splitlines()[-2]  # no memories either

    missing_user = cli_env / "nouser.jsonl"
    missing_user.write_text('{"id": "1", "role": "user", "content": "hi"}\n')
    code, _, err = run(capsys, "import", str(missing_user), "--personality", "sage")
    assert code == 1 and "pass --user ID" in err


def test_two_users_in_one_channel_keep_their_own_memories(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's transcript: Alice and Bob at once, each reply naming the message it answers."""
    run(capsys, "personality", "create", "Lilith")
    where = {"channel_id": "55", "guild_id": "7"}
    lines = [
        {
            "id": "1",
            "role": "user",
            "content": "Lilith, my bank PIN is 4921, remember it",
            "user_id": "A",
            "author": "Alice",
            **where,
        },
        {
            "id": "2",
            "role": "user",
            "content": "Lilith, what's a good book?",
            "user_id": "B",
            "author": "Bob",
            **where,
        },
        {
            "id": "3",
            "role": "assistant",
            "content": "Alice, I'll remember your PIN 4921.",
            "reply_to": "1",
            **where,
        },
        {"id": "4", "role": "assistant", "content": "Bob, try Dune.", "reply_to": "2", **where},
        # A NUL byte and a lone surrogate are stored sanely, not refused by the database.
        {"id": "5", "role": "user", "content": "a\u0000b \ud800", "user_id": "A", "author": "Alice", **where},
        {"id": "6", "role": "assistant", "content": "ok \udfff", "reply_to": "5", **where},
    ]
    transcript = cli_env / "two.jsonl"
    transcript.write_text("\n".join(json.dumps(line) for line in lines))
    code, out, err = run(capsys, "import", str(transcript), "--personality", "lilith")
    assert code == 0, err
    assert "memories stored: 3" in out

    def recall(user: str) -> list[dict[str, object]]:
        code, out, _ = run(capsys, "recall", "PIN", "--personality", "lilith", "--user", user, "--json")
        assert code == 0
        return json.loads(out)["memories"]  # type: ignore[no-any-return]

    assert recall("B") == []  # Bob never said anything about a PIN, and Alice's PIN is not his
    alice = recall("A")
    # Its own words first; the next exchange, which shares no word with "PIN", comes only as context.
    assert len(alice) == 1 and alice[0]["source_message_ids"] == ["1", "3", "5", "6"]
    assert alice[0]["content"] == (
        "Alice: Lilith, my bank PIN is 4921, remember it\nLilith: Alice, I'll remember your PIN 4921."
        "\nAlice: ab \ufffd\nLilith: ok \ufffd"
    )
    code, out, _ = run(capsys, "memory", "stats", "--personality", "lilith")
    assert "pending: 0 messages" in out


def test_sillytavern_chat_becomes_memories_of_the_cards_personality(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A user brings a character and their chat with it: the card, then the chat, then recall."""
    from tests.memory.owners.cards import SERAPHINA_V2
    from tests.memory.transfer.test_sillytavern import SERAPHINA_CHAT

    card = cli_env / "seraphina.json"
    card.write_text(json.dumps(SERAPHINA_V2))
    chat = cli_env / "Seraphina - 2026-11-22@16h50m00s.jsonl"
    chat.write_text(SERAPHINA_CHAT)

    code, _, err = run(capsys, "import", str(chat), "--format", "sillytavern", "--user", "555")
    assert code == 1
    assert err == (
        "personae: No personality named 'seraphina' (the chat's character): import its card first "
        "(`personae personality import CARD`) or pass --personality NAME.\n"
    )
    code, out, err = run(capsys, "personality", "import", str(card))
    assert code == 0, err
    code, _, err = run(capsys, "import", str(chat), "--format", "sillytavern")
    assert (code, err) == (
        1,
        "personae: A SillyTavern chat names no user id: pass --user ID (whose history it is).\n",
    )

    code, out, err = run(capsys, "import", str(chat), "--format", "sillytavern", "--user", "555")
    assert code == 0, err
    assert "messages read:   5 (5 new)" in out
    assert "memories stored: 2" in out
    assert (
        "skipped lines:   3\n"
        "  line 5: a system or hidden message\n"
        "  line 6: a narrator's line\n"
        "  line 7: blank\n"
    ) in out
    code, out, _ = run(capsys, "import", str(chat), "--format", "sillytavern", "--user", "555")
    assert "(0 new)" in out and "memories stored: 0" in out
    # Another swipe of a reply kept in SillyTavern since: that exchange's memory is made again, whole.
    chat.write_text(
        SERAPHINA_CHAT.replace('"mes": "We will find Miso before nightfall."', '"mes": "At dawn."')
    )
    code, out, _ = run(capsys, "import", str(chat), "--format", "sillytavern", "--user", "555")
    assert "(1 new)" in out and "memories stored: 1" in out

    code, out, _ = run(
        capsys, "recall", "Miso's white paw", "--personality", "seraphina", "--user", "555", "--json"
    )
    contents = [m["content"] for m in json.loads(out)["memories"]]
    assert "Ann: Thank you. Miso has a white paw.\nSeraphina: A white paw, I'll look for it." in contents
    code, out, _ = run(capsys, "recall", "Miso", "--personality", "seraphina", "--user", "556", "--json")
    assert json.loads(out)["memories"] == []  # another user's history is not theirs

    broken = cli_env / "broken.jsonl"
    broken.write_text(SERAPHINA_CHAT + '{"name": "Ann", "is_user": "yes", "mes": "hi"}\n')
    code, _, err = run(capsys, "import", str(broken), "--format", "sillytavern", "--user", "555")
    assert (code, err) == (1, "personae: Line 10: 'is_user' must be true or false.\n")


def test_a_jsonl_import_still_needs_its_personality(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Named by --personality, or by each line (an export's lines name theirs)."""
    code, _, err = run(capsys, "import", str(SAGE))
    assert (code, err) == (1, "personae: Line 1: the line names no personality: pass --personality NAME.\n")


def test_a_broken_summarizer_is_reported_in_one_line(
    cli_env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """SUMMARIZER_MODEL set without a key: the import says why every summary is extractive, once,
    instead of a warning per exchange in the progress bar; `memory stats` counts them by reason."""
    monkeypatch.setenv("SUMMARIZER_MODEL", "openai/gpt-4o-mini")
    for variable in ("SUMMARIZER_API_KEY", "SUMMARIZER_API_BASE", "OPENAI_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    assert run(capsys, "personality", "create", "Sage", "--memory-mode", "summarized")[0] == 0

    code, out, err = run(capsys, "import", str(SAGE), "--personality", "sage")
    assert code == 0, err
    assert "summarizer failed for 11 of 12 exchanges: missing API key (set SUMMARIZER_API_KEY)" in out
    assert err.count("WARNING") <= 1

    code, out, _ = run(capsys, "memory", "stats", "--personality", "sage")
    assert code == 0
    assert "summarizer failed for 11 of 12 exchanges: configuration error" in out


def test_a_file_in_the_other_format_is_named_with_the_option_that_reads_it(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.memory.transfer.test_sillytavern import SERAPHINA_CHAT

    run(capsys, "personality", "create", "Sage")
    chat = cli_env / "chat.jsonl"
    chat.write_text(SERAPHINA_CHAT)
    code, _, err = run(capsys, "import", str(chat), "--personality", "sage")
    assert (code, err) == (
        1,
        "personae: Line 1: missing required field(s) id, role, content; this looks like a SillyTavern chat: "
        "pass --format sillytavern.\n",
    )
    code, _, err = run(capsys, "import", str(SAGE), "--format", "sillytavern", "--user", "1")
    assert code == 1
    assert err.endswith("this looks like a Personae transcript: pass --format jsonl.\n")
    assert err.count("\n") == 1


def test_skipped_lines_are_listed_with_why_the_first_few_or_all(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, "personality", "create", "Sage")
    lines = ['{"id": "1", "role": "user", "content": "hi", "user_id": "7"}']
    lines += [""] * 4 + [json.dumps({"id": f"e{n}", "role": "user", "content": " "}) for n in range(3)]
    transcript = cli_env / "gaps.jsonl"
    transcript.write_text("\n".join(lines) + "\n")
    code, out, err = run(capsys, "import", str(transcript), "--personality", "sage")
    assert code == 0, err
    assert out.split("skipped lines:   ")[1] == (
        "7\n"
        "  line 2: blank\n"
        "  line 3: blank\n"
        "  line 4: blank\n"
        "  line 5: blank\n"
        "  line 6: empty content\n"
        "  ... and 2 more (-v lists them all)\n"
    )
    code, out, _ = run(capsys, "import", str(transcript), "--personality", "sage", "-v")
    assert out.split("skipped lines:   ")[1].splitlines()[-2:] == [
        "  line 7: empty content",
        "  line 8: empty content",
    ]
