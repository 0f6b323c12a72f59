"""The memory CLI contract (import, recall --json, stats, reindex --check) on the sample chats,
run in-process through `main()` against a scratch database and a fresh embedded index."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.cli import main
from bot.cli.demo import EXAMPLES_DIR

SAGE = EXAMPLES_DIR / "sage.jsonl"


def user_message_ids(path: Path, user_id: str) -> set[str]:
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {line["id"] for line in lines if line.get("user_id") == user_id}


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, scratch_database_url: str, tmp_path: Path) -> Path:
    monkeypatch.setenv("DATABASE_URL", scratch_database_url)
    monkeypatch.setenv("PERSONAE_DATA_DIR", str(tmp_path / "data"))
    for variable in ("QDRANT_URL", "SUMMARIZER_MODEL", "CHAT_MODEL"):
        monkeypatch.delenv(variable, raising=False)
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


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
    assert set(first) == {"id", "score", "content", "content_verbatim", "source_message_ids", "occurred_at"}
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
    assert err.strip() == 'personae: line 3: \'role\' must be "user" or "assistant"'
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
    assert alice[0]["source_message_ids"] == ["1", "3"]
    assert alice[0]["content"] == (
        "Alice: Lilith, my bank PIN is 4921, remember it\nLilith: Alice, I'll remember your PIN 4921."
    )
    assert {"Alice: ab \ufffd\nLilith: ok \ufffd"} <= {m["content"] for m in alice}
    code, out, _ = run(capsys, "memory", "stats", "--personality", "lilith")
    assert "pending: 0 messages" in out


def test_sillytavern_chat_becomes_memories_of_the_cards_personality(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A user brings a character and their chat with it: the card, then the chat, then recall."""
    from tests.memory.formation.test_sillytavern import SERAPHINA_CHAT
    from tests.memory.owners.cards import SERAPHINA_V2

    card = cli_env / "seraphina.json"
    card.write_text(json.dumps(SERAPHINA_V2))
    chat = cli_env / "Seraphina - 2026-11-22@16h50m00s.jsonl"
    chat.write_text(SERAPHINA_CHAT)

    code, _, err = run(capsys, "import", str(chat), "--format", "sillytavern", "--user", "555")
    assert code == 1
    assert err == (
        "personae: no personality named 'seraphina' (the chat's character): import its card first "
        "(`personae personality import CARD`) or pass --personality NAME\n"
    )
    code, out, err = run(capsys, "personality", "import", str(card))
    assert code == 0, err
    code, _, err = run(capsys, "import", str(chat), "--format", "sillytavern")
    assert (code, err) == (
        1,
        "personae: a SillyTavern chat names no user id: pass --user ID (whose history it is)\n",
    )

    code, out, err = run(capsys, "import", str(chat), "--format", "sillytavern", "--user", "555")
    assert code == 0, err
    assert "messages read:   5 (5 new)" in out
    assert "memories stored: 2" in out
    assert "skipped lines:   3" in out  # the hidden line, the narrator, the blank line
    code, out, _ = run(capsys, "import", str(chat), "--format", "sillytavern", "--user", "555")
    assert "(0 new)" in out and "memories stored: 0" in out

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
    assert (code, err) == (1, "personae: line 10: 'is_user' must be true or false\n")


def test_a_jsonl_import_still_needs_its_personality(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Named by --personality, or by each line (an export's lines name theirs)."""
    code, _, err = run(capsys, "import", str(SAGE))
    assert (code, err) == (1, "personae: line 1: the line names no personality: pass --personality NAME\n")
