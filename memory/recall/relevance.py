"""Whether a memory read by recall is about the question, and how much its words answer it.

Judged on the memory's own words (never its neighbours'): its text and what was said in its
exchange word for word (a summary may have dropped a word the question has), each side apart. A
word of the question that only the personality's reply holds counts REPLY_SHARE of one the user
said: "without a lecture" in Lilith's reply makes no memory of a "quantum chromodynamics lecture".

- The floor (`RelevanceFloor`): a memory's cosine with the question plus the share of the question's
  content words it holds (`Question.coverage`), or that share alone when it is half the question's
  content at least. Unless a memory read reaches the floor, the question is not about anything said:
  nothing is recalled; a general question's memory must hold its topic, the question's rarest word.
  When one does, the others that share no word with the question and stay below
  the floor are left out too, and so is any whose score is 0 (the last of every side found, and
  earning no bonus).
- Answers before questions: a memory whose user only asked the question again goes after the others
  (`questions_last`), and earns no bonus.
- The bonuses: ANSWER_KIND_BONUS for a memory that holds the kind of answer asked for, unless only
  its reply does while its user asked a question (the memory of asking, not of the answer);
  HEAD_BONUS for one that holds the noun asked about.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from sqlalchemy import ScalarSelect, any_, func, select
from sqlalchemy.sql.selectable import LateralFromClause

from memory.recall.keywords import query_terms
from memory.recall.question import Question, asked_in
from memory.types import MessageRole
from models import Memory, Message


class _Identified(Protocol):
    @property
    def id(self) -> uuid.UUID: ...


T = TypeVar("T", bound=_Identified)

# The relevance floor (see the module docstring). A question about the user ("my", "I") or naming
# either of the two who talk asks about their life, which these memories are: the bar is low (a
# content word in common, or a cosine of related texts); a general one ("how do tides work?") must
# show its subject. bench.recall_questions: 94.4% of unrelated questions returned nothing before
# issue 31 (docs/PERFORMANCE.md has the figures since).
RELEVANCE_FLOOR = 0.6
HALF_THE_CONTENT = 0.5
ABOUT_USER_FLOOR = 0.15
# What a question word counts for when only the personality's reply holds it.
REPLY_SHARE = 0.5
# Added to the fused score of a memory holding the kind of answer the question asks for (a time for
# "when", an amount for "how many", a name for "who" and "where": `Question.holds_answer`), among the
# best read. On bench.recall_questions direct questions first 80.5% -> 82.8%, LoCoMo dev r@10
# 83.9 -> 84.5 (verbatim, without neighbours); 0.1 to 0.3 measured alike.
ANSWER_KIND_BONUS = 0.2
# Added to the fused score of a memory holding the noun the question asks about (`Question.head`:
# the address of "what's my sister's address"). bench.recall_questions direct first, verbatim /
# summarized: 85.0 / 84.3% without, 85.7 / 85.0% at 0.4 (0.2 alike; 0.6 a fix and a loss); LoCoMo dev
# r@10 unchanged within noise. A bonus for adjacent content words found together ("Lisbon map") was
# measured and left out: one more direct question, LoCoMo r@10 -0.4.
HEAD_BONUS = 0.4


def _said(role: MessageRole) -> ScalarSelect[str | None]:
    """What one side said in a memory's exchange, word for word (correlated to the memory's row). A
    memory its user corrected is judged on their words alone: none."""
    return (
        select(func.string_agg(Message.content, "\n"))
        .where(
            Message.conversation_id == Memory.conversation_id,
            Message.external_id == any_(Memory.source_message_ids),
            Message.role == role.value,
            Memory.edited_at.is_(None),
        )
        .correlate(Memory)
        .scalar_subquery()
    )


# The user's side alone, for a statement that reads only it (memory.formation.forgotten).
SAID_BY_USER = _said(MessageRole.USER)


def _said_by_side() -> LateralFromClause:
    """What each side said in a memory's exchange (`by_user`, `in_reply`), as `_said` reads one: its
    messages read once for both, a join of the memory read (a row whatever is found)."""
    said = func.string_agg(Message.content, "\n")
    return (
        select(
            said.filter(Message.role == MessageRole.USER.value).label("by_user"),
            said.filter(Message.role == MessageRole.ASSISTANT.value).label("in_reply"),
        )
        .where(
            Message.conversation_id == Memory.conversation_id,
            Message.external_id == any_(Memory.source_message_ids),
            Memory.edited_at.is_(None),
        )
        .lateral("said")
    )


SAID = _said_by_side()


@dataclass(frozen=True, slots=True)
class MemoryWords:
    """A memory's own words, the user's side and the personality's, with their keyword terms
    (`query_terms`) read once: every test below asks them, of every memory recall reads."""

    users: str
    replies: str
    user_terms: frozenset[int]
    all_terms: frozenset[int]

    @classmethod
    def of(cls, users: str, replies: str) -> MemoryWords:
        # The analyzer reads word by word: the terms of both sides are those of each side.
        user_terms = query_terms(users)
        return cls(users, replies, user_terms, user_terms | query_terms(replies) if replies else user_terms)

    @classmethod
    def read(cls, content: str, summarized: bool, by_user: str | None, in_reply: str | None) -> MemoryWords:
        """From its text and what each side said (`SAID`): a verbatim text is those messages, a
        summary (or a correction) the user's side of it."""
        if by_user is None and in_reply is None:
            return cls.of(content, "")
        users = f"{content}\n{by_user or ''}" if summarized else by_user or ""
        return cls.of(users, in_reply or "")

    @property
    def all(self) -> str:
        return f"{self.users}\n{self.replies}"

    def coverage(self, question: Question) -> float:
        """The share of the question's content the memory holds, a word only the reply holds counting
        REPLY_SHARE."""
        return max(question.coverage_of(self.user_terms), REPLY_SHARE * question.coverage_of(self.all_terms))

    def asks_again(self, question: Question) -> bool:
        """Whether the user's words only ask again a question about themselves ("What car do I drive,
        do you remember?"): a question of theirs holds half its content, the rest of their words none
        of it, and no answer of the kind asked for. Asked about someone else, the other side's answer
        is the memory's point ("How long have you been married?" "Five years."): LoCoMo dev's recall@10
        fell 83.7 -> 80.6 when those went last."""
        if not question.about_user or "?" not in self.users:  # the cheap tests first
            return False
        asked, rest = asked_in(self.users)
        return (
            bool(asked)
            and question.coverage(asked) >= HALF_THE_CONTENT
            and question.coverage(rest) == 0
            and not question.holds_answer(self.users)
        )

    def answers(self, question: Question) -> bool:
        """Whether it holds the kind of answer asked for, and not only in a reply to the user asking."""
        if question.holds_answer(self.users):
            return True
        return "?" not in self.users and question.holds_answer(self.all)


def asking_again(question: Question, words: Mapping[uuid.UUID, MemoryWords]) -> set[uuid.UUID]:
    """The memories whose user only asked the question again (`MemoryWords.asks_again`)."""
    return {i for i, w in words.items() if w.asks_again(question)}


@dataclass(frozen=True, slots=True)
class RelevanceFloor:
    """The floor for one question (see the module docstring); a general question's memory must also
    hold its topic (`Question.topic`): "sound engineer" is no answer to "what is the speed of sound"."""

    floor: float
    topic: frozenset[int] = frozenset()

    @classmethod
    def of(cls, question: Question) -> RelevanceFloor:
        if question.about_user or question.about_participants:
            return cls(ABOUT_USER_FLOOR)
        return cls(RELEVANCE_FLOOR, question.topic)

    def reached(self, coverage: float, cosine: float, words: MemoryWords) -> bool:
        if self.topic and self.topic.isdisjoint(words.all_terms):
            return False
        return coverage >= HALF_THE_CONTENT or coverage + cosine >= self.floor


def relevant(
    question: Question,
    words: Mapping[uuid.UUID, MemoryWords],
    cosines: Mapping[uuid.UUID, float],
    scores: Mapping[uuid.UUID, float],
    pins: Collection[uuid.UUID] = (),
) -> set[uuid.UUID]:
    """The memories read (`words`) that recall may return: none unless one reaches the floor; else
    each that reaches it or shares a word with the question, and scores above 0 with its bonuses (a
    pin the question is about, `pins`, whatever its score)."""
    floor = RelevanceFloor.of(question)
    covered = {i: w.coverage(question) for i, w in words.items()}
    reaching = {i for i, c in covered.items() if floor.reached(c, cosines.get(i, 0.0), words[i])}
    if not reaching:
        return set()
    return {i for i in words if (i in reaching or covered[i] > 0) and (scores.get(i, 0.0) > 0 or i in pins)}


def add_bonuses(
    question: Question,
    words: Mapping[uuid.UUID, MemoryWords],
    scores: MutableMapping[uuid.UUID, float],
    asking: Collection[uuid.UUID],
) -> None:
    """ANSWER_KIND_BONUS and HEAD_BONUS added to the scores of the memories that earn them; none to
    those whose user only asked the question again (`asking`, from `asking_again`)."""
    for i, w in words.items():
        if i in asking:
            continue
        if w.answers(question):
            scores[i] = scores.get(i, 0.0) + ANSWER_KIND_BONUS
        if question.head_among(w.all_terms):
            scores[i] = scores.get(i, 0.0) + HEAD_BONUS


def questions_last(ranked: Sequence[T], asking: Collection[uuid.UUID]) -> list[T]:
    """The memories in order, those whose user only asked the question again (`asking`, from
    `asking_again`) after the others, in their order."""
    return [m for m in ranked if m.id not in asking] + [m for m in ranked if m.id in asking]
