"""Grouping the message log into exchanges: the unit a memory is made of, built from reply links."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from memory.conversations import LoggedMessage
from memory.formation.exchanges import group_exchanges, render_lines
from memory.types import MessageRole

T0 = datetime(2024, 3, 1, tzinfo=UTC)


def log(*spec: str) -> list[LoggedMessage]:
    """`u1:hi` is user 1 saying hi (id m1, m2... by position); `a:hello` is the personality answering
    the nearest user message before it, `a>m1:hello` answering m1."""
    messages = []
    last_user: str | None = None
    for i, item in enumerate(spec):
        who, _, text = item.partition(":")
        who, _, answers = who.partition(">")
        role = MessageRole.ASSISTANT if who == "a" else MessageRole.USER
        external_id = f"m{i + 1}"
        messages.append(
            LoggedMessage(
                external_id=external_id,
                author_id="bot" if who == "a" else who,
                author_name=None,
                role=role,
                content=text,
                created_at=T0 + timedelta(minutes=i),
                reply_to=(answers or last_user) if role is MessageRole.ASSISTANT else None,
            )
        )
        if role is MessageRole.USER:
            last_user = external_id
    return messages


def ids(messages: object) -> list[str]:
    return [m.external_id for m in messages]  # type: ignore[attr-defined]


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
    assert ids(grouping.waiting) == ["m4"]


def test_user_message_without_reply_waits() -> None:
    grouping = group_exchanges(log("u1:hello?"))
    assert grouping.exchanges == []
    assert ids(grouping.waiting) == ["m1"]


def test_reply_without_user_message_is_orphan() -> None:
    grouping = group_exchanges(log("a:Welcome, traveller", "u1:hi", "a:hi"))
    assert ids(grouping.orphans) == ["m1"]
    assert grouping.exchanges[0].source_message_ids == ["m2", "m3"]
    assert grouping.exchanges[0].context == tuple(log("a:Welcome, traveller"))


def test_reply_to_a_message_not_in_the_log_is_orphan() -> None:
    grouping = group_exchanges(log("u1:hi", "a>gone:hello"))  # its message was deleted
    assert grouping.exchanges == [] and ids(grouping.orphans) == ["m2"] and ids(grouping.waiting) == ["m1"]


def test_each_reply_is_remembered_with_the_one_it_answers() -> None:
    # Two users at once; the replies finish in the other order, each naming its message.
    grouping = group_exchanges(
        log("alice:my PIN is 4921", "bob:a good book?", "a>m1:I'll remember your PIN", "a>m2:try Dune")
    )
    alice, bob = grouping.exchanges
    assert (alice.user_id, alice.source_message_ids) == ("alice", ["m1", "m3"])
    assert (bob.user_id, bob.source_message_ids) == ("bob", ["m2", "m4"])
    assert ids(bob.context) == ["m1"]  # the other user's line is context only
    assert grouping.waiting == [] and grouping.orphans == []


def test_a_user_waiting_for_a_reply_is_not_taken_by_another_users_exchange() -> None:
    grouping = group_exchanges(log("alice:hi", "bob:hello", "a>m1:hi Alice"))
    [alice] = grouping.exchanges
    assert alice.source_message_ids == ["m1", "m3"]
    assert ids(grouping.waiting) == ["m2"]


def test_unanswered_messages_join_the_next_answered_message_of_their_author() -> None:
    grouping = group_exchanges(
        log("alice:first", "bob:hey", "alice:second", "a>m2:hey Bob", "alice:third", "a>m5:about third")
    )
    bob, alice = grouping.exchanges
    assert bob.source_message_ids == ["m2", "m4"]
    assert alice.user_id == "alice" and alice.source_message_ids == ["m1", "m3", "m5", "m6"]
    assert grouping.waiting == []


def test_only_formable_messages_are_grouped_and_a_late_reply_stands_alone() -> None:
    messages = log("alice:one", "alice:two", "a>m2:about two", "a>m1:about one", "bob:hi")
    # m1..m3 were remembered together (m1 had no reply yet); m4 answers m1 late; m5 is context.
    grouping = group_exchanges(messages, formable={"m4"})
    [late] = grouping.exchanges
    assert (late.user_id, late.user_messages, ids(late.replies)) == ("alice", (), ["m4"])
    assert ids(late.context) == ["m1", "m2", "m3"]
    assert grouping.waiting == [] and grouping.orphans == []


def test_context_is_at_most_three_messages_before_the_exchange() -> None:
    messages = log("u1:a", "a:b", "u1:c", "a:d", "u1:e", "a:f")
    grouping = group_exchanges(messages, formable={"m5", "m6"})
    [exchange] = grouping.exchanges
    assert ids(exchange.context) == ["m2", "m3", "m4"]


def test_empty_log() -> None:
    grouping = group_exchanges([])
    assert grouping.exchanges == [] and grouping.waiting == [] and grouping.orphans == []


def test_render_names_speakers() -> None:
    exchange = group_exchanges(log("u1:hi", "a:hello")).exchanges[0]
    assert exchange.render(user_name="Alice", personality_name="Lilith") == "Alice: hi\nLilith: hello"


def test_render_lines_one_line_form_keeps_every_speaker_on_its_line() -> None:
    said = [
        LoggedMessage("a", "u1", "Alice", MessageRole.USER, "hi\n\nthere <|im_end|>", T0),
        LoggedMessage("b", "bot", None, MessageRole.ASSISTANT, "  hello\tAlice ", T0, reply_to="a"),
    ]
    assert (
        render_lines(said, personality_name="Lilith") == "Alice: hi\n\nthere <|im_end|>\nLilith: hello\tAlice"
    )
    assert (
        render_lines(said, personality_name="Lilith", one_line=True) == "Alice: hi there\nLilith: hello Alice"
    )


def excluding(messages: list[LoggedMessage], *external_ids: str) -> list[LoggedMessage]:
    """The log with these messages marked excluded (said incognito, or forgotten)."""
    return [replace(m, excluded=True) if m.external_id in external_ids else m for m in messages]


def test_an_excluded_message_and_its_replies_are_in_no_exchange_and_no_context() -> None:
    messages = excluding(
        log("u1:hi", "a:hello", "u1:my secret is 42", "a:I see, 42", "u1:bye", "a:bye!"), "m3"
    )
    grouping = group_exchanges(messages)
    first, last = grouping.exchanges
    assert first.source_message_ids == ["m1", "m2"] and last.source_message_ids == ["m5", "m6"]
    assert ids(grouping.excluded) == ["m3", "m4"]
    # Neither the secret nor the reply that repeats it is context of the next memory.
    assert ids(last.context) == ["m1", "m2"]
    assert "42" not in last.render_context() and grouping.waiting == []


def test_an_excluded_message_with_no_reply_is_left_out_not_joined_to_the_next_exchange() -> None:
    messages = excluding(log("u1:psst, incognito", "u1:back to normal", "a:welcome back"), "m1")
    grouping = group_exchanges(messages)
    [exchange] = grouping.exchanges
    assert exchange.source_message_ids == ["m2", "m3"]
    assert ids(grouping.excluded) == ["m1"] and exchange.context == ()


def test_an_exchange_with_an_excluded_reply_is_left_out_whole_and_earlier_messages_wait() -> None:
    messages = excluding(log("u1:unanswered", "u1:question", "a:forgotten answer"), "m3")
    grouping = group_exchanges(messages)
    assert grouping.exchanges == []
    assert ids(grouping.excluded) == ["m2", "m3"] and ids(grouping.waiting) == ["m1"]


def test_a_late_reply_to_an_excluded_message_is_left_out() -> None:
    messages = excluding(log("alice:secret", "a>m1:about the secret", "bob:hi", "a>m3:hi Bob"), "m1")
    # m1 was marked done as excluded before its reply was stored: the reply alone is formable.
    grouping = group_exchanges(messages, formable={"m2", "m3", "m4"})
    [bob] = grouping.exchanges
    assert bob.source_message_ids == ["m3", "m4"] and ids(bob.context) == []
    assert ids(grouping.excluded) == ["m2"]


def test_context_reaches_past_excluded_messages_for_three_others() -> None:
    messages = excluding(
        log("u1:a", "a:b", "u1:c", "a:d", "u2:secret", "a>m5:secret reply", "u1:e", "a>m7:f"), "m5"
    )
    grouping = group_exchanges(messages, formable={"m7", "m8"})
    [exchange] = grouping.exchanges
    assert ids(exchange.context) == ["m2", "m3", "m4"]
