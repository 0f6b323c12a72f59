"""Recall: the user's memories of a personality that best match a query, in the venue asking.

The question is read first (memory.recall.question: the words that carry it, its shape). The index
finds candidates by meaning (dense, the query without the participants' names: memory.recall.query)
and by keyword (sparse, the question's content words) within the venue's filter; the two lists are
fused here, whatever the backend; the text then comes from Postgres, re-checking ownership, so a
stale index entry can neither leak nor revive a forgotten memory. A question about nothing said
recalls nothing, and no memory sharing nothing with it comes (memory.recall.relevance); a memory
holding the kind of answer asked for goes up. The exchanges just before and after the best memories
come with them as their context, when the words fit: what was said around an answer often completes
it. Memories their user pinned come first, when the query is about them (PIN_MIN_SIMILARITY).
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import BindParameter, ScalarSelect, and_, any_, bindparam, func, literal, or_, select, true
from sqlalchemy.dialects.postgresql import ARRAY, UUID
from sqlalchemy.ext.asyncio import AsyncSession

from memory.conversations import storable_text
from memory.owners.user_settings import fresh_setting
from memory.recall.index import Candidates
from memory.recall.query import dense_query, names_of
from memory.recall.question import read_question
from memory.recall.relevance import (
    SAID,
    MemoryWords,
    add_bonuses,
    asking_again,
    questions_last,
    relevant,
)
from memory.recall.store import MemoryStore
from memory.types import MemoryState, RecallFilter
from models import Memory, Message, UserSettings

# Candidates asked of each side. Measured flat from 20 to 100 on long conversations: a memory found
# low on one side and high on the other is still in both lists.
CANDIDATES = 60
# The dense side's share of a fused score, the keyword side's the rest. With a small local embedder
# the keyword side is the stronger one (with the analyzer and the date and previous-line keying);
# 0.2 to 0.4 measured alike, equal weights clearly worse.
DENSE_WEIGHT = 0.3
# The dense side's share for a question about the user ("my horse", "what do I drive"): they ask
# in their own paraphrase of what they said ("horse" for "gelding", "pet" for "tortoise"), and their
# question's content words are few. bench.recall_questions direct first, verbatim / summarized: 83.6 /
# 82.9% at 0.3, 85.7 / 85.0% at 0.4 to 0.5, 85.0% at 0.6; LoCoMo's questions are in the third person.
ABOUT_USER_DENSE_WEIGHT = 0.5
# The least a side gives a memory it found (min-max would give its last 0): a score of 0 means found
# by neither, never relevant (memory.recall.relevance).
FOUND_FLOOR = 0.01
# A memory only the dense side found, at a cosine this low, is noise rather than a memory of what was
# asked. Unrelated texts score about 0 to 0.1 with the local MiniLM, related ones 0.3 and up; a
# memory with a keyword in common is kept whatever its cosine.
MIN_DENSE_SIMILARITY = 0.1
# A pinned memory is recalled ahead of the others when the query is about it: it shares a word with
# the query, or its meaning is this close (related texts score 0.2 and up against a short query with
# the local MiniLM, unrelated ones about 0). A pin the query is not about keeps its rank, or stays away.
PIN_MIN_SIMILARITY = 0.25
# The words a recall returns, on average per memory asked for, context included: the exchanges around
# the best memories come with them only while the whole answer stays within limit x this. Recall is
# not bought with bigger memories; on long conversations (about 58 words a memory) this leaves room
# for one or two neighbours in ten, which pay more there than the same slots given to more hits.
CONTEXT_WORDS_PER_MEMORY = 65
# The best memories whose neighbours may come with them, best first, in the same one query. Those
# of the best three against the best alone, LoCoMo dev r@10: summarized 84.0 -> 85.9 (405 words in
# the top 10 against 334), verbatim 85.4 -> 85.8 (656 against 640; the word budget holds them back).
CONTEXT_HITS = 3
# Fused scores this close are equals: the memory said more often goes first, then the more recent.
EQUAL_SCORES = 0.01
# A hit restates one ranked above it, and goes after every hit that does not (demoted, not dropped:
# the test is a guess), when their stored embeddings (the whole exchange) are this close and they hold
# the same names and numbers, enough to tell a memory apart (`_facts`, `_telling`): "I pay 950 a month
# in rent" / "My rent is 950 pounds a month". Closeness alone is no test: "a walk, it was rainy" and
# "... warm" score 0.93, "I practised fencing" / "... karate" 0.74, "I ride my bike to work" /
# "Cycling is how I commute" as low as 0.75. bench.repeats: near-duplicates in the top 10 13.5% ->
# 11.7%; at 0.6, LoCoMo dev r@10 verbatim 85.6 -> 84.7 (one name in common, "LGBTQ", was a fact then).
# On 14 pairs written apart from the benches: 6 of 6 restatements joined, 1 of 8 others ("Grandpa
# Joe is 88" / "... lives at number 88").
SAME_FACTS_CLOSENESS = 0.8


@dataclass(frozen=True, slots=True)
class StoredMemory:
    """A memory as recall reads it from Postgres: what it returns, and what places it in its thread."""

    id: uuid.UUID
    content: str
    content_verbatim: str | None
    source_message_ids: list[str]
    occurred_at: datetime
    summarized: bool
    summarizer: str
    pinned: bool
    conversation_id: int | None
    times_said: int
    repeat_of: uuid.UUID | None


# Only these columns are read, as plain rows: measured faster than whole ORM entities (about 2 ms a
# recall for a typical user, 5 for one with 5,000 memories, at 30,000 memories).
_READ = tuple(getattr(Memory, field.name) for field in dataclasses.fields(StoredMemory))
_ID_ARRAY = ARRAY(UUID(as_uuid=True))
# The memories a recall reads, with what each side said in them (memory.recall.relevance `SAID`): the
# `best` few, and any of the `pins` (pinned, the query about them) wherever they ranked: one query.
# Built once, its values parameters: building and keying it anew cost ~0.7 ms of each recall's
# event loop.
_READ_HITS = (
    select(*_READ, SAID.c.by_user, SAID.c.in_reply)
    .select_from(Memory)
    .join(SAID, true())
    .where(
        or_(
            Memory.id == any_(bindparam("best", type_=_ID_ARRAY)),
            and_(Memory.id == any_(bindparam("pins", type_=_ID_ARRAY)), Memory.pinned),
        ),
        Memory.state != MemoryState.DELETED.value,
        Memory.personality_id == bindparam("personality_id"),
        Memory.user_id == bindparam("user_id"),
        Memory.forgotten_claim_id.is_(None),
    )
)


@dataclass(frozen=True, slots=True)
class RecalledMemory(StoredMemory):
    """A memory recalled: as read (its own text, messages and id), with its score, and the memories
    said just before and after it in its conversation that came with it (`context`, conversation
    order). What is shown beside its id is its own text; a prompt reads it with its context
    (`text_with_context`). Its score is the fused one (`fuse`, in [0, 1]) plus the bonuses of
    memory.recall.relevance (the kind of answer asked for, the noun asked about)."""

    score: float
    context: tuple[StoredMemory, ...] = ()
    pinned_first: bool = False  # recalled first for being pinned (`pins_first`), not for its rank

    @property
    def text_with_context(self) -> str:
        """Its own words first, then those of its context, a memory a line."""
        return "\n".join([self.content, *(m.content for m in self.context)])

    @property
    def sources_with_context(self) -> list[str]:
        """The messages of its own text, then those of its context."""
        return [*self.source_message_ids, *(s for m in self.context for s in m.source_message_ids)]


def fuse(candidates: Candidates, *, dense_weight: float = DENSE_WEIGHT) -> dict[uuid.UUID, float]:
    """Each side's scores min-max normalised to [FOUND_FLOOR, 1], then weighted and summed (absent = 0).

    A blend of scores rather than of ranks: the weaker side cannot lift its long tail over what the
    stronger side found clearly, and a memory both sides found scores highest. In [0, 1].
    """
    fused: dict[uuid.UUID, float] = {}
    for hits, weight in ((candidates.dense, dense_weight), (candidates.keyword, 1.0 - dense_weight)):
        if not hits:
            continue
        low, high = min(h.score for h in hits), max(h.score for h in hits)
        for hit in hits:
            normalised = 1.0 if high <= low else (hit.score - low) / (high - low)
            fused[hit.id] = fused.get(hit.id, 0.0) + weight * max(normalised, FOUND_FLOOR)
    return fused


async def recall(
    store: MemoryStore,
    *,
    personality_id: int,
    user_id: str,
    query: str,
    guild_id: str | None = None,
    limit: int = 5,
    for_reply: bool = False,
) -> list[RecalledMemory]:
    """The user's memories of this personality that best match the query, for this venue only.

    Nothing when no memory is about the question (memory.recall.relevance), or, `for_reply` (a reply's
    prompt), when the user chose fresh mode. Else best first by fused score (`fuse`, plus
    the relevance bonuses), among equals (EQUAL_SCORES) the one said more often, then the
    most recent, except that relevant pinned memories come before all of them (`pins_first`); one
    memory of each group of repeats (`one_of_each`). The best CONTEXT_HITS carry the exchanges just
    before and after them as context while the words fit (`with_context`). The query is searched as
    given (MemoryService.recall removes a user's chat-template tokens first).
    """
    # Bytes that were not UTF-8 reach Python as lone surrogates, which no tokenizer takes.
    query = storable_text(query).strip()
    if not query or limit <= 0:
        return []
    index = await store.ready()
    # One session, its reads one after the other; the query's embedding runs beside the first.
    async with store.sessionmaker() as session:
        venue = await _query_vector_and_venue(
            store, session, personality_id, user_id, query, in_guild=guild_id is not None, for_reply=for_reply
        )
        if venue is None:
            return []
        dense, allow_dm, names = venue
        flt = RecallFilter(
            personality_id=personality_id, user_id=user_id, guild_id=guild_id, allow_dm=allow_dm
        )
        question = read_question(query, names)
        found = await index.search(
            dense=dense, sparse=question.keywords, flt=flt, limit=max(CANDIDATES, limit * 2)
        )
        shared_words = {hit.id for hit in found.keyword}
        found = dataclasses.replace(
            found,
            dense=[h for h in found.dense if h.score >= MIN_DENSE_SIMILARITY or h.id in shared_words],
        )
        scores = fuse(found, dense_weight=ABOUT_USER_DENSE_WEIGHT if question.about_user else DENSE_WEIGHT)
        if not scores:
            return []
        best = sorted(scores, key=lambda i: -scores[i])[: limit * 2]
        # Candidates a pin among them would be recalled first for (see PIN_MIN_SIMILARITY).
        about = shared_words | {h.id for h in found.dense if h.score >= PIN_MIN_SIMILARITY}
        rows = await session.execute(
            _READ_HITS,
            {
                "best": sorted(best),
                "pins": sorted(about.difference(best)),
                "personality_id": personality_id,
                "user_id": user_id,
            },
        )
        words: dict[uuid.UUID, MemoryWords] = {}
        read = []
        for *fields, by_user, in_reply in rows:
            read.append(memory := StoredMemory(*fields))
            words[memory.id] = MemoryWords.read(memory.content, memory.summarized, by_user, in_reply)
        cosines = {h.id: h.score for h in found.dense}
        pins = {m.id for m in read if m.pinned and m.id in about}
        asking = asking_again(question, words)
        add_bonuses(question, words, scores, asking)
        allowed = relevant(question, words, cosines, scores, pins)
        read = [m for m in read if m.id in allowed]
        if not read:
            return []
        ranked = one_of_each(pins_first(questions_last(by_score(read, scores), asking), about))
        vectors = await index.dense_vectors([m.id for m in ranked])
        hits = restatements_last(ranked, vectors, names)[:limit]
        around = await _neighbours(session, personality_id, user_id, hits[:CONTEXT_HITS])
    pinned_first = {m.id for m in hits if m.pinned and m.id in about}
    return [
        _recalled(hit, context, scores.get(hit.id, 0.0), pinned_first=hit.id in pinned_first)
        for hit, context in with_context(hits, around, budget=limit * CONTEXT_WORDS_PER_MEMORY)
    ]


async def _query_vector_and_venue(
    store: MemoryStore,
    session: AsyncSession,
    personality_id: int,
    user_id: str,
    query: str,
    *,
    in_guild: bool,
    for_reply: bool,
) -> tuple[list[float], bool, frozenset[str]] | None:
    """The dense query's vector, whether the user's DM memories may come (`allow_dm`), and the
    participants' names; None when `for_reply` and the user chose fresh mode.

    The embedding runs in its thread while Postgres answers: the DM setting (and fresh mode, for a
    reply) is read beside it (never kept: a user turning it off is obeyed at once, by every
    process), and the participants' names too when they are not kept, in the same query. Those
    names are then not known yet: the query is embedded as given, and again without them only when
    it names one.
    """
    names = store.participants.kept(personality_id, user_id)
    text = dense_query(query, names or ())
    embedding = asyncio.ensure_future(store.embedder.embed([text]))
    fresh = fresh_setting(user_id, personality_id) if for_reply else literal(None)
    try:
        if names is None:
            names_read = names_of(personality_id, user_id).subquery()
            venue = select(
                select(func.array_agg(names_read.c.name)).scalar_subquery(),
                _allows_dm(user_id, personality_id),
                fresh,
            )
            listed, allow_dm, is_fresh = (await session.execute(venue)).one()
            names = frozenset(name for name in listed or () if name)
            store.participants.keep(personality_id, user_id, names)
        elif in_guild or for_reply:
            settings = select(_allows_dm(user_id, personality_id), fresh)
            allow_dm, is_fresh = (await session.execute(settings)).one()
        else:
            allow_dm = is_fresh = False
    except BaseException:
        embedding.cancel()
        raise
    if is_fresh:
        embedding.cancel()
        return None
    [dense] = await embedding
    if dense_query(query, names) != text:
        [dense] = await store.embedder.embed([dense_query(query, names)])
    return dense, bool(in_guild and allow_dm), names


def by_score(read: Sequence[StoredMemory], scores: Mapping[uuid.UUID, float]) -> list[StoredMemory]:
    """Best score first; scores within EQUAL_SCORES are equal: the memory said more often first,
    then the more recent."""
    return sorted(
        read,
        key=lambda m: (
            -round(scores.get(m.id, 0.0) / EQUAL_SCORES),
            -m.times_said,
            -m.occurred_at.timestamp(),
            m.id,
        ),
    )


def one_of_each(ranked: Sequence[StoredMemory]) -> list[StoredMemory]:
    """The memories in order, each but the first of a group saying the same thing left out: the
    repeats of one memory (`repeat_of`), or the same words."""
    seen: set[uuid.UUID | str] = set()
    kept = []
    for memory in ranked:
        same: set[uuid.UUID | str] = {
            memory.repeat_of or memory.id,
            " ".join(memory.content.casefold().split()),
        }
        if same.isdisjoint(seen):
            kept.append(memory)
        seen |= same
    return kept


def restatements_last(
    ranked: Sequence[StoredMemory], vectors: Mapping[uuid.UUID, Sequence[float]], names: Collection[str] = ()
) -> list[StoredMemory]:
    """The memories in order, each that restates one kept above it moved after all the others (see
    SAME_FACTS_CLOSENESS); a pin keeps its place. The participants' `names` are in every memory, no
    facts of one."""
    spoken = {name.casefold() for name in names}
    kept: list[tuple[np.ndarray, frozenset[str], frozenset[str]]] = []
    first, later = [], []
    for memory in ranked:
        vector = vectors.get(memory.id)
        if vector is None or memory.pinned:
            first.append(memory)
            continue
        unit = np.asarray(vector, dtype=np.float32)
        unit /= float(np.linalg.norm(unit)) or 1.0
        facts = _facts(memory.content) - spoken
        words = _vocabulary(memory.content)
        if any(_restates(unit, facts, words, *other) for other in kept):
            later.append(memory)
        else:
            first.append(memory)
            kept.append((unit, facts, words))
    return first + later


def _restates(
    vector: np.ndarray,
    facts: frozenset[str],
    words: frozenset[str],
    other: np.ndarray,
    other_facts: frozenset[str],
    other_words: frozenset[str],
) -> bool:
    """Close, and each holds the other's facts among its words, telling ones between them: "Nora, my
    sister, works at Google" holds those of "My sister Nora works at Google" though "Nora" starts
    a sentence there (no fact then)."""
    return (
        float(vector @ other) >= SAME_FACTS_CLOSENESS
        and _telling(facts | other_facts)
        and facts <= other_words
        and other_facts <= words
    )


def _telling(facts: frozenset[str]) -> bool:
    """Whether these facts tell a memory apart: a number, or two names at least (one name alone is a
    topic many memories share: "LGBTQ", a nickname)."""
    return any(f.isdigit() for f in facts) or len(facts) >= 2


# A number (an ordinal as its number), or a capitalised word inside a sentence: a name, a month.
_FACT = re.compile(r"(\d+)(?:st|nd|rd|th)?\b|(?<=[\w,;] )([A-Z][\w'’-]*)")
_LABEL = re.compile(r"^[^\s:][^\n:]{0,39}?:[ \t]", re.MULTILINE)


def _vocabulary(text: str) -> frozenset[str]:
    """A memory's words and numbers as `_facts` spells them, its speakers' labels left out."""
    found = _WORD.findall(_LABEL.sub("", text))
    return frozenset(w.casefold().removesuffix("'s").removesuffix("’s") for w in found)


_WORD = re.compile(r"\d+|[^\W\d_][\w'’-]*")


def _facts(text: str) -> frozenset[str]:
    """The names and numbers a memory's text holds, its speakers' labels left out."""
    found = (m.group(1) or m.group(2) for m in _FACT.finditer(_LABEL.sub("", text)))
    return frozenset(
        f.casefold().removesuffix("'s").removesuffix("’s") for f in found if f not in {"I", "I'm"}
    )


def pins_first(ranked: Sequence[StoredMemory], about: Collection[uuid.UUID]) -> list[StoredMemory]:
    """The pinned memories the query is `about` moved ahead, in their order; the rest after."""
    pins = [m for m in ranked if m.pinned and m.id in about]
    ahead = {m.id for m in pins}
    return pins + [m for m in ranked if m.id not in ahead]


Around = tuple[
    StoredMemory | None, StoredMemory | None
]  # the memories just before and after one, in its conversation


def with_context(
    hits: Sequence[StoredMemory], around: Mapping[uuid.UUID, Around], *, budget: int
) -> list[tuple[StoredMemory, Around]]:
    """Each hit with the neighbours that come with it: those of the hits in `around`, best hit first,
    each neighbour once, never one recalled as a hit itself, and only while the words of the whole
    answer (hits and context) stay within `budget`. The hits themselves are never cut.
    """
    words = sum(_words(m) for m in hits)
    taken = {m.id for m in hits}
    out: list[tuple[StoredMemory, Around]] = []
    for hit in hits:
        kept: list[StoredMemory | None] = []
        for neighbour in around.get(hit.id, (None, None)):
            if neighbour is None or neighbour.id in taken or words + _words(neighbour) > budget:
                kept.append(None)
                continue
            taken.add(neighbour.id)
            words += _words(neighbour)
            kept.append(neighbour)
        out.append((hit, (kept[0], kept[1])))
    return out


def _words(memory: StoredMemory) -> int:
    return len(memory.content.split())


def _recalled(hit: StoredMemory, context: Around, score: float, *, pinned_first: bool) -> RecalledMemory:
    own: dict[str, Any] = {field.name: getattr(hit, field.name) for field in dataclasses.fields(StoredMemory)}
    return RecalledMemory(
        **own, score=score, context=tuple(m for m in context if m is not None), pinned_first=pinned_first
    )


async def _neighbours(
    session: AsyncSession, personality_id: int, user_id: str, memories: Sequence[StoredMemory]
) -> dict[uuid.UUID, Around]:
    """The memories of this user just before and after each of these in its conversation (not
    forgotten), in one query; a memory of no conversation has none.

    Conversation order is the log order of each memory's first message. Only memories at the
    nearest earlier time, the same time, or the nearest later time of each are read: an imported
    transcript may give a whole session one timestamp.
    """
    placed = [m for m in memories if m.conversation_id is not None]
    if not placed:
        return {}
    owner = (
        Memory.personality_id == personality_id,
        Memory.user_id == user_id,
        Memory.state != MemoryState.DELETED.value,
        Memory.forgotten_claim_id.is_(None),
    )
    windows, lows, highs = [], [], []
    for memory in placed:
        same = (*owner, Memory.conversation_id == memory.conversation_id)
        at = memory.occurred_at
        # The nearest times before and after, each the first entry of the owner-thread index that way.
        earlier = (
            select(Memory.occurred_at)
            .where(*same, Memory.occurred_at < at)
            .order_by(Memory.occurred_at.desc())
            .limit(1)
            .scalar_subquery()
        )
        later = (
            select(Memory.occurred_at)
            .where(*same, Memory.occurred_at > at)
            .order_by(Memory.occurred_at)
            .limit(1)
            .scalar_subquery()
        )
        lows.append(func.coalesce(earlier, at))
        highs.append(func.coalesce(later, at))
        windows.append(
            and_(
                Memory.conversation_id == memory.conversation_id,
                Memory.occurred_at.between(lows[-1], highs[-1]),
            )
        )
    # Conversation order within the windows (close memories' windows overlap: the merged order is
    # still the conversation's), and each memory's neighbours in it: only theirs are read whole.
    thread, order = Memory.conversation_id, (Memory.occurred_at, Message.id)
    line = (
        select(
            Memory.id,
            func.lag(Memory.id).over(partition_by=thread, order_by=order).label("before"),
            func.lead(Memory.id).over(partition_by=thread, order_by=order).label("after"),
        )
        .join(
            Message,
            (Message.conversation_id == Memory.conversation_id)
            & (Message.external_id == Memory.source_message_ids[1]),
        )
        # The span of all windows, for the index to read only that range; then each window.
        .where(*owner, Memory.occurred_at.between(func.least(*lows), func.greatest(*highs)), or_(*windows))
        .subquery("line")
    )
    rows = await session.execute(
        select(line.c.id.label("of"), (line.c.before == Memory.id).label("is_before"), *_READ)
        .join(Memory, or_(Memory.id == line.c.before, Memory.id == line.c.after))
        .where(line.c.id == any_(_ids(m.id for m in placed)))
    )
    around: dict[uuid.UUID, list[StoredMemory | None]] = {m.id: [None, None] for m in placed}
    for row in rows:
        memory_id, is_before, *fields = row
        around[memory_id][0 if is_before else 1] = StoredMemory(*fields)
    return {memory_id: (before, after) for memory_id, (before, after) in around.items()}


def _ids(ids: Iterable[uuid.UUID]) -> BindParameter[Any]:
    """Memory ids as one array parameter: one statement (prepared once) whatever their number."""
    value: Any = sorted(ids)
    return bindparam(None, value, type_=ARRAY(UUID(as_uuid=True)))


def _allows_dm(user_id: str, personality_id: int) -> ScalarSelect[bool | None]:
    """Whether the user let their DM memories (of this personality, or of all) be recalled in guilds."""
    return (
        select(func.bool_or(UserSettings.allow_dm_recall_in_guilds))
        .where(
            UserSettings.user_id == user_id,
            or_(UserSettings.personality_id.is_(None), UserSettings.personality_id == personality_id),
        )
        .scalar_subquery()
    )
