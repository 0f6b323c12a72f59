"""Exchanges do not cross a long silence (issue 30): a new session opens a new exchange."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memory.conversations import LoggedMessage
from memory.formation.exchanges import SILENCE, group_exchanges
from memory.types import MessageRole

SESSION_1 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
SESSION_2 = datetime(2023, 5, 25, 13, 14, tzinfo=UTC)


def _user(external_id: str, text: str, at: datetime) -> LoggedMessage:
    return LoggedMessage(external_id, "caroline", "Caroline", MessageRole.USER, text, at)


def _reply(external_id: str, text: str, at: datetime, answers: str) -> LoggedMessage:
    return LoggedMessage(external_id, "melanie", "Melanie", MessageRole.ASSISTANT, text, at, reply_to=answers)


LOG = [
    _user("D1:17", "Bye Mel, have fun swimming!", SESSION_1),
    _reply("D1:18", "Thanks! Going swimming with the kids now.", SESSION_1 + timedelta(minutes=1), "D1:17"),
    # Session 2 opens with Melanie's line, which the importer links to the last user line before it.
    _reply("D2:1", "I ran a charity race for mental health last Saturday!", SESSION_2, "D1:17"),
    _user("D2:2", "That charity race sounds great, Mel!", SESSION_2 + timedelta(minutes=1)),
    _reply("D2:3", "Thanks, it was rewarding.", SESSION_2 + timedelta(minutes=2), "D2:2"),
]


def test_a_line_after_a_long_silence_opens_a_new_exchange() -> None:
    exchanges = group_exchanges(LOG).exchanges
    assert [e.source_message_ids for e in exchanges] == [["D1:17", "D1:18"], ["D2:1"], ["D2:2", "D2:3"]]
    opening = exchanges[1]
    assert opening.user_id == "caroline" and opening.occurred_at == SESSION_2
    assert opening.context == ()  # nothing from session 1
    assert [m.external_id for m in exchanges[2].context] == ["D2:1"]


def test_a_first_reply_after_a_silence_still_answers_its_message() -> None:
    # A bot catching up after a restart answers hours later: that reply is still the exchange's.
    said = _user("u1", "what should I plant in May?", SESSION_1)
    late = _reply("r1", "Tomatoes and basil.", SESSION_1 + SILENCE * 2, "u1")
    [exchange] = group_exchanges([said, late]).exchanges
    assert exchange.source_message_ids == ["u1", "r1"]


def test_parts_of_one_reply_within_the_silence_stay_together() -> None:
    said = _user("u1", "tell me about ferns", SESSION_1)
    parts = [_reply(f"r{i}", f"part {i}", SESSION_1 + timedelta(minutes=i), "u1") for i in range(1, 4)]
    [exchange] = group_exchanges([said, *parts]).exchanges
    assert exchange.source_message_ids == ["u1", "r1", "r2", "r3"]
