"""Forgotten claims: what a user forgot or corrected stays forgotten, whatever words it comes back in.

Forgetting a memory (by id, "Forget this") or correcting it records what was removed, for that user
and personality: the embedding and key facts of its claim (memory.formation.restatements
`claim_text`), never its text; a correction also what is right (its words) and the values it took
out (memory.formation.supersession). Then:

- the user's live memories that state the claim (say it again by meaning, or hold a value the
  correction took out, in the user's words or the personality's) are superseded (`forgotten_claim_id`,
  `superseded_at`): kept for export and audit, listed with the mark, never recalled; pinning one
  lets it back;
- formation supersedes a new memory that states the claim, unless its user says it again after the
  claim was recorded: that is their newest word, remembered, and the claim holds nothing back since
  (`restated_at`; what it superseded stays superseded).

A text closer to a correction than to the claim it replaced repeats the correction: it stays.
Forgetting all of a user's memories (of a personality, or all) clears their claims, so that they can
start over; the memories their claims silenced are forgotten with the rest.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from sqlalchemy import any_, delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.elements import ColumnElement

from memory.formation.fidelity import vocabulary
from memory.formation.restatements import (
    Statement,
    claim_text,
    closeness,
    meaning_text,
    says_again,
    statement,
    unit_vector,
)
from memory.formation.supersession import Verdict, WrongValues, wrong_values
from memory.recall.keywords import encode_sparse_query
from memory.recall.relevance import SAID_BY_USER
from memory.recall.store import MemoryStore
from memory.types import MemoryState, RecallFilter
from models import ForgottenClaim, Memory, Message, Personality

# forgotten_claims.kind
FORGOTTEN_CLAIM = "forgotten"
CORRECTED_CLAIM = "corrected"
# How close (cosine, all-MiniLM-L6-v2, the user's words against the claim) a text must be to say a
# forgotten claim again, its key facts held and nothing negated. bench/data/corrections.jsonl:
# paraphrases score 0.60 to 0.96 bar one (0.46: "pregnant with our second baby" against "expecting
# another child"); other things said about the same people up to 0.67, one above 0.60
# (docs/PERFORMANCE.md, bench.corrections).
CLAIM_CLOSENESS = 0.6
# The user's memories looked at, when a claim is recorded, for saying it already (by meaning and by
# keyword, each side).
RESTATEMENT_CANDIDATES = 20
# The user's memories looked at by keyword for a wrong value's own words ("Thistle"): a name the
# correction took out is rare, so its memories are few.
SUPERSEDED_BY_VALUE = 50


@dataclass(frozen=True, slots=True)
class MemoryClaim:
    """What a stored memory claims (`claim_text`), who spoke in it, and where it was said."""

    memory_id: uuid.UUID
    personality_id: int
    user_id: str
    text: str
    speakers: tuple[str, ...]
    conversation_id: int | None
    repeat_of: uuid.UUID | None
    content: str = ""  # the whole text, the personality's lines too
    venue: tuple[str | None, bool] = (None, False)  # its guild, and whether it was said in a DM


@dataclass(frozen=True, slots=True)
class StoredClaim:
    """A recorded claim, as formation and supersession compare texts with it."""

    id: int
    memory_id: uuid.UUID
    said: Statement
    corrected_to: np.ndarray | None
    wrong: WrongValues | None = None
    created_at: datetime | None = None

    def stated_in(self, whole: str) -> bool:
        """Whether a text (a memory's whole text) holds a value the correction took out."""
        return self.wrong is not None and self.wrong.stated_in(vocabulary(whole))

    def verdict(
        self, users_words: Statement, replies: Statement | None, whole: str, *, said_at: datetime
    ) -> Verdict:
        """What a new memory does with this claim: the user's words (with their meaning) saying it
        again after it was recorded restate it; otherwise the memory states it (the personality's
        replies, with theirs, say it again, or its whole text holds a wrong value) or not."""
        by_user = self.said_again_by(users_words) or (
            self.wrong is not None and users_words.held is not None and self.wrong.stated_in(users_words.held)
        )
        if by_user and (self.created_at is None or said_at > self.created_at):
            return Verdict.RESTATED
        by_reply = replies is not None and self.said_again_by(replies)
        return Verdict.SUPERSEDED if by_user or by_reply or self.stated_in(whole) else Verdict.NONE

    def said_again_by(self, said: Statement) -> bool:
        """Whether `said` says this claim again, and not rather its correction."""
        if not says_again(said, self.said, cosine=closeness(said, self.said), at_least=CLAIM_CLOSENESS):
            return False
        return self.corrected_to is None or closeness(said, self.said) > float(
            said.vector @ self.corrected_to
        )


def _speakers() -> ColumnElement[list[str] | None]:
    """Who spoke in a memory's messages (correlated to the memory's row)."""
    return (
        select(func.array_agg(func.distinct(Message.author_name)))
        .where(
            Message.conversation_id == Memory.conversation_id,
            Message.external_id == any_(Memory.source_message_ids),
        )
        .correlate(Memory)
        .scalar_subquery()
    )


async def memory_claims(session: AsyncSession, *conditions: ColumnElement[bool]) -> list[MemoryClaim]:
    """The claims of the live memories matching the conditions (read before a memory is forgotten or
    corrected: its text goes)."""
    rows = await session.execute(
        select(
            Memory.id,
            Memory.personality_id,
            Memory.user_id,
            Memory.content,
            Personality.display_name,
            _speakers().label("spoke"),
            SAID_BY_USER.label("said"),
            Memory.conversation_id,
            Memory.repeat_of,
            Memory.guild_id,
            Memory.is_dm,
        )
        .join(Personality, Personality.id == Memory.personality_id)
        .where(Memory.state != MemoryState.DELETED.value, *conditions)
    )
    return [
        MemoryClaim(
            row.id,
            row.personality_id,
            row.user_id,
            row.said or claim_text(row.content, row.display_name),
            (row.display_name, *(s for s in row.spoke or () if s)),
            row.conversation_id,
            row.repeat_of,
            row.content,
            (row.guild_id, row.is_dm),
        )
        for row in rows
    ]


async def remember_claims(
    store: MemoryStore,
    session: AsyncSession,
    removed: Sequence[MemoryClaim],
    *,
    kind: str,
    corrected_to: Mapping[uuid.UUID, tuple[str, Sequence[float]]] | None = None,
) -> int:
    """Record the claims of these memories (forgotten, or corrected into `corrected_to`: the
    correction's words and embedding), in the session's transaction, then supersede the user's live
    memories that state them; how many."""
    if not removed:
        return 0
    vectors = await store.embedder.embed([meaning_text(r.text, r.speakers) for r in removed])
    superseded = 0
    for claim, vector in zip(removed, vectors, strict=True):
        said = statement(claim.text, vector, speakers=claim.speakers)
        corrected_text, correction = (corrected_to or {}).get(claim.memory_id, (None, None))
        wrong = (
            wrong_values(claim.text, corrected_text, speakers=claim.speakers)
            if corrected_text is not None
            else None
        )
        claim_id = await session.scalar(
            insert(ForgottenClaim)
            .values(
                personality_id=claim.personality_id,
                user_id=claim.user_id,
                memory_id=claim.memory_id,
                kind=kind,
                embedding=list(vector),
                embedding_model=store.embedding_model,
                facts={**said.stored_facts(), "wrong": wrong.as_json() if wrong else None},
                corrected_to=list(correction) if correction is not None else None,
                corrected_text=corrected_text,
            )
            .returning(ForgottenClaim.id)
        )
        assert claim_id is not None
        stored = StoredClaim(claim_id, claim.memory_id, said, _unit(correction), wrong or None)
        superseded += await _supersede(store, session, claim, stored, vector)
    return superseded


async def _supersede(
    store: MemoryStore, session: AsyncSession, claim: MemoryClaim, stored: StoredClaim, vector: list[float]
) -> int:
    """Supersede the user's live memories that state the claim (the corrected memory itself aside):
    found by meaning and by keyword, and by the wrong values' own words."""
    index = await store.ready()
    flt = RecallFilter(personality_id=claim.personality_id, user_id=claim.user_id)
    found = await index.search(
        dense=vector, sparse=encode_sparse_query(claim.text), flt=flt, limit=RESTATEMENT_CANDIDATES
    )
    ids = {hit.id for hit in (*found.dense, *found.keyword)}
    if stored.wrong and (values := stored.wrong.words_in(claim.text)):
        by_value = await index.search(
            dense=None, sparse=encode_sparse_query(values), flt=flt, limit=SUPERSEDED_BY_VALUE
        )
        ids |= {hit.id for hit in by_value.keyword}
    ids.discard(claim.memory_id)
    if not ids:
        return 0
    candidates = await memory_claims(
        session,
        Memory.id.in_(sorted(ids)),
        Memory.personality_id == claim.personality_id,
        Memory.user_id == claim.user_id,
        Memory.forgotten_claim_id.is_(None),
    )
    if not candidates:
        return 0
    vectors = await store.embedder.embed([meaning_text(c.text, c.speakers) for c in candidates])
    stating = [
        c.memory_id
        for c, vector in zip(candidates, vectors, strict=True)
        if stored.stated_in(c.content) or stored.said_again_by(statement(c.text, vector, speakers=c.speakers))
    ]
    if stating:
        await session.execute(
            update(Memory)
            .where(Memory.id.in_(stating))
            .values(forgotten_claim_id=stored.id, superseded_at=func.now())
        )
    return len(stating)


async def claims_of(
    session: AsyncSession, personality_id: int, user_ids: Collection[str]
) -> dict[str, list[StoredClaim]]:
    """The recorded claims of these users with this personality, by user."""
    rows = await session.execute(
        select(
            ForgottenClaim.id,
            ForgottenClaim.user_id,
            ForgottenClaim.memory_id,
            ForgottenClaim.embedding,
            ForgottenClaim.facts,
            ForgottenClaim.corrected_to,
            ForgottenClaim.created_at,
        ).where(
            ForgottenClaim.personality_id == personality_id,
            ForgottenClaim.user_id.in_(sorted(user_ids)),
            ForgottenClaim.restated_at.is_(None),
        )
    )
    claims: dict[str, list[StoredClaim]] = {}
    for claim_id, user_id, memory_id, embedding, facts, corrected_to, created_at in rows:
        said = Statement.stored(embedding, facts)
        wrong = WrongValues.from_json(facts.get("wrong"))
        claims.setdefault(user_id, []).append(
            StoredClaim(claim_id, memory_id, said, _unit(corrected_to), wrong, created_at)
        )
    return claims


async def mark_restated(session: AsyncSession, claim_ids: Collection[int]) -> None:
    """The user said these claims again: they hold no new memory back from now on."""
    if claim_ids:
        await session.execute(
            update(ForgottenClaim)
            .where(ForgottenClaim.id.in_(sorted(claim_ids)))
            .values(restated_at=func.now())
        )


async def clear_claims(session: AsyncSession, *, user_id: str, personality_id: int | None) -> int:
    """Forget what the user forgot (with one personality, or all): they start over; how many."""
    statement_ = delete(ForgottenClaim).where(ForgottenClaim.user_id == user_id)
    if personality_id is not None:
        statement_ = statement_.where(ForgottenClaim.personality_id == personality_id)
    return len((await session.scalars(statement_.returning(ForgottenClaim.id))).all())


def _unit(vector: Sequence[float] | None) -> np.ndarray | None:
    return unit_vector(vector) if vector is not None else None
