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

The steps have their rooms: the query's vector and venue (memory.recall.venue), the order
(memory.recall.ranking), the near-duplicates left out (memory.recall.near_duplicates), the context
(memory.recall.neighbours), the memory as read and returned (memory.recall.recalled).
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from sqlalchemy import and_, any_, bindparam, or_, select, true

from memory.conversations import storable_text
from memory.recall.near_duplicates import without_near_duplicates
from memory.recall.neighbours import Around, read_neighbours, with_context
from memory.recall.question import read_question
from memory.recall.ranking import (
    ABOUT_USER_DENSE_WEIGHT,
    DENSE_WEIGHT,
    as_arrays,
    by_score,
    fuse,
    one_of_each,
    pins_first,
    restatements_last,
)
from memory.recall.recalled import ID_ARRAY, STORED_COLUMNS, RecalledMemory, StoredMemory
from memory.recall.relevance import (
    SAID,
    MemoryWords,
    add_bonuses,
    asking_again,
    questions_last,
    relevant,
)
from memory.recall.store import MemoryStore
from memory.recall.venue import query_vector_and_venue
from memory.types import MemoryState, RecallFilter
from models import Memory

__all__ = ["RecalledMemory", "StoredMemory", "recall"]

# Candidates asked of each side. Measured flat from 20 to 100 on long conversations: a memory found
# low on one side and high on the other is still in both lists.
CANDIDATES = 60
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
# The memories a recall reads, with what each side said in them (memory.recall.relevance `SAID`): the
# `best` few, and any of the `pins` (pinned, the query about them) wherever they ranked: one query.
# Built once, its values parameters: building and keying it anew cost ~0.7 ms of each recall's
# event loop.
_READ_HITS = (
    select(*STORED_COLUMNS, SAID.c.by_user, SAID.c.in_reply)
    .select_from(Memory)
    .join(SAID, true())
    .where(
        or_(
            Memory.id == any_(bindparam("best", type_=ID_ARRAY)),
            and_(Memory.id == any_(bindparam("pins", type_=ID_ARRAY)), Memory.pinned),
        ),
        Memory.state != MemoryState.DELETED.value,
        Memory.personality_id == bindparam("personality_id"),
        Memory.user_id == bindparam("user_id"),
        Memory.forgotten_claim_id.is_(None),
    )
)


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
    memory of each group of repeats (`one_of_each`), and none saying again in other words what one
    above it says (memory.recall.near_duplicates). The best CONTEXT_HITS carry the exchanges just
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
        venue = await query_vector_and_venue(
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
        vectors = as_arrays(await index.dense_vectors([m.id for m in ranked]))
        hits = restatements_last(
            without_near_duplicates(ranked, vectors, words, question, names), vectors, names
        )[:limit]
        around = await read_neighbours(session, personality_id, user_id, hits[:CONTEXT_HITS])
    pinned_first = {m.id for m in hits if m.pinned and m.id in about}
    return [
        _recalled(hit, context, scores.get(hit.id, 0.0), pinned_first=hit.id in pinned_first)
        for hit, context in with_context(hits, around, budget=limit * CONTEXT_WORDS_PER_MEMORY)
    ]


def _recalled(hit: StoredMemory, context: Around, score: float, *, pinned_first: bool) -> RecalledMemory:
    own: dict[str, Any] = {field.name: getattr(hit, field.name) for field in dataclasses.fields(StoredMemory)}
    return RecalledMemory(
        **own, score=score, context=tuple(m for m in context if m is not None), pinned_first=pinned_first
    )
