"""Grouping the message log into exchanges: the unit a memory is made of."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memory.formation.exchanges import LoggedMessage, group_exchanges, render_lines
from memory.types import MessageRole

T0 = datetime(2024, 3, 1, tzinfo=UTC)


def log(*spec: str) -> list[LoggedMessage]:
    """`u1:hi` is user 1 saying hi; `a:hello` is the personality."""
    messages = []
    for i, item in enumerate(spec):
        who, _, text = item.partition(":")
        role = MessageRole.ASSISTANT if who == "a" else MessageRole.USER
        messages.append(
            LoggedMessage(
                id=i + 1,
                external_id=f"m{i + 1}",
                author_id="bot" if who == "a" else who,
                author_name=None,
                role=role,
                content=text,
                created_at=T0 + timedelta(minutes=i),
            )
        )
    return messages


def test_pairs_user_and_reply() -> None:
    grouping = group_exchanges(log("u1:hi", "a:hello", "u1:how are you", "a:fine"))
    assert [e.source_message_ids for e in grouping.exchanges] == [["m1", "m2"], ["m3", "m4"]]
    assert grouping.waiting == [] and grouping.orphans == []
    assert grouping.exchanges[1].context[-2:] == tuple(log("u1:hi", "a:hello"))
    assert grouping.exchanges[0].occurred_at == T0 + timedelta(minutes=1)


def test_several_user_messages_before_one_reply_are_one_exchange() -> None:
    grouping = group_exchanges(log("u1:so", "u1:guess what", "u1:I got the job", "a:congrats!"))
    assert len(grouping.exchanges) == 1
    assert grouping.exchanges[0].source_message_ids == ["m1", "m2", "m3", "m4"]


def test_reply_split_in_parts_belongs_together() -> None:
    grouping = group_exchanges(log("u1:tell me a story", "a:part one", "a:part two", "u1:nice"))
    assert grouping.exchanges[0].source_message_ids == ["m1", "m2", "m3"]
    assert [m.external_id for m in grouping.waiting] == ["m4"]


def test_user_message_without_reply_waits() -> None:
    grouping = group_exchanges(log("u1:hello?"))
    assert grouping.exchanges == []
    assert [m.external_id for m in grouping.waiting] == ["m1"]


def test_reply_without_user_message_is_orphan() -> None:
    grouping = group_exchanges(log("a:Welcome, traveller", "u1:hi", "a:hi"))
    assert [m.external_id for m in grouping.orphans] == ["m1"]
    assert grouping.exchanges[0].source_message_ids == ["m2", "m3"]
    assert grouping.exchanges[0].context == tuple(log("a:Welcome, traveller"))


def test_shared_channel_reply_answers_the_last_speaker() -> None:
    grouping = group_exchanges(log("u1:I like tea", "u2:I like coffee", "a:coffee it is"))
    exchange = grouping.exchanges[0]
    assert exchange.user_id == "u2"
    assert exchange.source_message_ids == ["m2", "m3"]
    assert [m.external_id for m in exchange.bystanders] == ["m1"]
    assert [m.external_id for m in exchange.context] == ["m1"]


def test_context_is_at_most_three_messages_and_uses_history() -> None:
    messages = log("u1:a", "a:b", "u1:c", "a:d", "u1:e", "a:f")
    history, pending = messages[:4], messages[4:]
    grouping = group_exchanges(pending, history=history)
    assert [m.external_id for m in grouping.exchanges[0].context] == ["m2", "m3", "m4"]


def test_empty_log() -> None:
    grouping = group_exchanges([])
    assert grouping.exchanges == [] and grouping.waiting == [] and grouping.orphans == []


def test_render_names_speakers() -> None:
    exchange = group_exchanges(log("u1:hi", "a:hello")).exchanges[0]
    assert exchange.render(user_name="Alice", personality_name="Lilith") == "Alice: hi\nLilith: hello"


def test_render_lines_one_line_form_keeps_every_speaker_on_its_line() -> None:
    said = [
        LoggedMessage(1, "a", "u1", "Alice", MessageRole.USER, "hi\n\nthere <|im_end|>", T0),
        LoggedMessage(2, "b", "bot", None, MessageRole.ASSISTANT, "  hello\tAlice ", T0),
    ]
    assert (
        render_lines(said, personality_name="Lilith") == "Alice: hi\n\nthere <|im_end|>\nLilith: hello\tAlice"
    )
    assert (
        render_lines(said, personality_name="Lilith", one_line=True) == "Alice: hi there\nLilith: hello Alice"
    )
