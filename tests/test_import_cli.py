"""`personae import` and `personae recall` on what real files and real deployments bring: ids two files
share, DMs beside guild lines, a model down mid-import, bytes no UTF-8 decoder expects. Run in-process
through `main()` against a scratch database and a fresh embedded index, as tests/test_memory_cli.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from testkit.cli import closed_port, remote_embedder, run

WHERE = {"guild_id": "G", "channel_id": "C"}


def write(folder: Path, name: str, *lines: dict[str, Any], prefix: bytes = b"") -> str:
    path = folder / name
    path.write_bytes(prefix + "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode())
    return str(path)


def recalled(capsys: pytest.CaptureFixture[str], query: str, user: str, *where: str) -> list[str]:
    code, out, err = run(capsys, "recall", query, "--personality", "lilith", "--user", user, "--json", *where)
    assert code == 0, err
    return [m["content"] for m in json.loads(out)["memories"]]


def test_a_second_file_reusing_ids_in_the_channel_is_refused_not_merged(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 20, item 1: Bob's file reuses Alice's id 1 in the same channel. It used to be stored as
    "2 (1 new)": Bob's line dropped, his reply linked to Alice's PIN and recalled as hers."""
    run(capsys, "personality", "create", "Lilith")
    alice = write(
        cli_env,
        "alice.jsonl",
        {"id": "1", "role": "user", "content": "my bank PIN is 4921", "user_id": "A", **WHERE},
        {"id": "2", "role": "assistant", "content": "Noted, Alice.", "reply_to": "1", **WHERE},
    )
    bob = [
        {"id": "1", "role": "user", "content": "what is a good book?", "user_id": "B", **WHERE},
        {"id": "3", "role": "assistant", "content": "Bob, Dune is great", "reply_to": "1", **WHERE},
    ]
    assert run(capsys, "import", alice, "--personality", "lilith")[0] == 0
    code, out, err = run(capsys, "import", write(cli_env, "bob.jsonl", *bob), "--personality", "lilith")
    assert (code, out) == (1, "")
    assert err == (
        "personae: Line 1: id '1' is already in the log for another message (said by someone else); "
        "give this file's messages ids of their own (a prefix naming the file will do).\n"
    )
    alices = recalled(capsys, "Dune book PIN", "A", "--guild", "G")
    assert any("4921" in m for m in alices) and all("Dune" not in m for m in alices)
    assert recalled(capsys, "Dune book", "B", "--guild", "G") == []  # nothing of Bob's was written

    # With ids of their own, Bob's lines are his; Alice's file again adds nothing.
    renamed = [{**line, "id": f"bob-{line['id']}", "reply_to": "bob-1"} for line in bob]
    code, out, _ = run(capsys, "import", write(cli_env, "bob2.jsonl", *renamed), "--personality", "lilith")
    assert code == 0 and "messages read:   2 (2 new)" in out and "memories stored: 1" in out
    assert any("Dune" in m for m in recalled(capsys, "Dune book", "B", "--guild", "G"))
    assert all("4921" not in m for m in recalled(capsys, "Dune book PIN", "B", "--guild", "G"))
    code, out, _ = run(capsys, "import", alice, "--personality", "lilith")
    assert code == 0 and "(0 new)" in out


def test_a_dm_is_never_recalled_in_the_guild_of_a_line_without_a_channel(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 20, item 2: a guild line with no channel, then the same user's DMs. Both were keyed
    `dm:{user}`: the DM joined the guild conversation and its memories were recalled in the guild."""
    run(capsys, "personality", "create", "Lilith")
    guild = write(
        cli_env,
        "guild.jsonl",
        {"id": "g1", "role": "user", "content": "hello everyone", "user_id": "42", "guild_id": "G1"},
        {"id": "g2", "role": "assistant", "content": "hello there", "guild_id": "G1"},
    )
    dm = write(
        cli_env,
        "dm.jsonl",
        {"id": "d1", "role": "user", "content": "my secret diagnosis is asthma", "user_id": "42"},
        {"id": "d2", "role": "assistant", "content": "I will keep your secret"},
    )
    assert run(capsys, "import", guild, "--personality", "lilith")[0] == 0
    assert run(capsys, "import", dm, "--personality", "lilith")[0] == 0
    assert all("asthma" not in m for m in recalled(capsys, "secret diagnosis asthma", "42", "--guild", "G1"))
    assert any("asthma" in m for m in recalled(capsys, "secret diagnosis asthma", "42"))  # in a DM
    assert any("hello everyone" in m for m in recalled(capsys, "hello everyone", "42", "--guild", "G1"))


def test_a_byte_order_mark_and_raw_line_separators_import(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 20, items 3 and 17: valid JSONL that Notepad or an export writes was refused on line 1."""
    run(capsys, "personality", "create", "Lilith")
    path = write(
        cli_env,
        "bom.jsonl",
        {"id": "1", "role": "user", "content": "one\u2028two\u2029three\u0085four", "user_id": "7"},
        {"id": "2", "role": "assistant", "content": "heard"},
        prefix=b"\xef\xbb\xbf",
    )
    code, out, err = run(capsys, "import", path, "--personality", "lilith")
    assert code == 0, err
    assert "messages read:   2 (2 new)" in out and "memories stored: 1" in out
    assert any("one\u2028two\u2029three\u0085four" in m for m in recalled(capsys, "one two three four", "7"))


def test_an_embedding_endpoint_down_during_import_says_so_in_one_line(
    cli_env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 20, item 15: the messages are stored, the memories wait; no traceback."""
    run(capsys, "personality", "create", "Lilith")
    for name, value in remote_embedder(f"http://127.0.0.1:{closed_port()}/v1").items():
        monkeypatch.setenv(name, value)
    path = write(
        cli_env,
        "t.jsonl",
        {"id": "1", "role": "user", "content": "my bike is blue", "user_id": "7"},
        {"id": "2", "role": "assistant", "content": "blue, noted"},
    )
    code, out, err = run(capsys, "import", path, "--personality", "lilith")
    assert code == 1 and "Traceback" not in err
    [line] = err.strip().splitlines()
    said = line[line.index("personae:") :]  # after the progress bar's remains
    assert said.startswith("personae: 2 new messages stored, but forming their memories failed: ")
    assert said.endswith("run the same import again (or `personae worker`) once the model answers.")
    code, out, _ = run(capsys, "memory", "stats")
    assert "pending: 2 messages" in out
    code, out, err = run(capsys, "recall", "bike", "--personality", "lilith", "--user", "7")
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert err[err.index("personae:") :].startswith(
        "personae: LLM openai/text-embedding-3-small unavailable: "
    )


def test_a_lone_surrogate_in_a_recall_query_is_one_line_naming_the_fix(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bytes that are not UTF-8 on the command line reach Python as lone surrogates (issue 20, item 15):
    like any argument's (issue 33, item 7), they are refused in one line that names the fix, exit 2."""
    run(capsys, "personality", "create", "Lilith")
    path = write(
        cli_env,
        "t.jsonl",
        {"id": "1", "role": "user", "content": "my bike is blue", "user_id": "7"},
        {"id": "2", "role": "assistant", "content": "blue, noted"},
    )
    assert run(capsys, "import", path, "--personality", "lilith")[0] == 0
    code, out, err = run(
        capsys, "recall", "bike \udcff blue", "--personality", "lilith", "--user", "7", "--json"
    )
    assert code == 2 and not out
    assert err == (
        "personae: The argument 'bike \ufffd blue' is not valid UTF-8 text; pass it as UTF-8 (check the "
        "encoding of the terminal or the script that runs personae).\n"
    )
    code, out, err = run(capsys, "recall", "bike blue", "--personality", "lilith", "--user", "7", "--json")
    assert code == 0, err
    assert json.loads(out)["memories"][0]["source_message_ids"] == ["1", "2"]
