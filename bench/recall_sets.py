"""Recall test sets for bench.recall_quality: the dialogue type, and a hard synthetic set of our own.

A dialogue is one user talking with one personality, as transcript records `personae import` reads,
plus questions naming the messages (`evidence`, transcript ids) that hold their answers.

The synthetic set is built so recall is not tuned to one benchmark: thousands of exchanges for one
user, most of them near-duplicate small talk; facts stated once among look-alikes (a neighbour's dog
beside the user's own); corrections ("actually I moved to Lyon") whose answer is the later message;
relative dates ("last Tuesday") asked about by calendar date; and paraphrased questions. Seeded, so
every run builds the same set.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    evidence: tuple[str, ...]  # transcript ids of the messages holding the answer
    category: str


@dataclass
class Dialogue:
    name: str
    user_id: str
    personality_name: str
    lines: list[dict[str, Any]]
    questions: list[Question] = field(default_factory=list)


# fmt: off
_SMALL_TALK = [
    "I had {food} for dinner again tonight, nothing special.",
    "The weather was {weather} all day, so I mostly stayed in.",
    "Work was busy today, lots of meetings about the {project} project.",
    "I watched another episode of that {genre} series before bed.",
    "Went for a short walk around the block, it was {weather}.",
    "Cooked {food} for lunch, it turned out okay.",
    "Spent the evening reading a {genre} novel.",
    "My commute took forever today because of the {weather} weather.",
    # Small talk sharing the facts' words: keyword matching alone must not be enough.
    "Saw a cute dog at the park, it looked a bit like a {weather} day cloud.",
    "Talked to my sister on the phone about {food} recipes.",
    "Thinking about learning to play an instrument someday, maybe.",
    "My friend's car broke down again on the way to the {project} meeting.",
    "Heard a new band on the radio, something {genre}-themed.",
    "I might move to a bigger city one day, who knows.",
    "Read an article about allergies and {food}, kind of scary.",
    "Someone at work has a job interview next week for the {project} team.",
]
_FOODS = ["pasta", "curry", "soup", "tacos", "salad", "ramen", "risotto", "dumplings", "pizza", "stew"]
_WEATHER = ["rainy", "sunny", "windy", "grey", "cold", "humid", "foggy", "warm"]
_PROJECTS = ["billing", "onboarding", "search", "mobile", "reporting", "migration"]
_GENRES = ["crime", "sci-fi", "fantasy", "history", "comedy", "thriller"]
_REPLIES = [
    "That sounds like a calm day. How are you feeling about it?",
    "Oh nice, thanks for telling me! Anything else on your mind?",
    "I hope tomorrow is a bit more exciting for you.",
    "Ha, that sounds familiar. Did you enjoy it at least?",
    "Sounds good. Remember to rest a little too!",
]
# (statement, look-alike distractor, question, category)
_FACTS = [
    ("My dog is called Pepper, she's a little terrier.",
     "My neighbour's dog is called Biscuit, he barks all night.", "What is my dog's name?"),
    ("My sister Leila just started studying medicine in Porto.",
     "My cousin Leona is studying law somewhere in Spain.", "What does my sister study?"),
    ("I'm allergic to hazelnuts, I found out as a kid.",
     "My friend is allergic to cats, poor thing.", "What am I allergic to?"),
    ("My favourite band is Khruangbin, I saw them live twice.",
     "My brother's favourite band is some metal group I can't stand.", "Which band do I love?"),
    ("I play the cello in a community orchestra on Thursdays.",
     "My colleague plays guitar in a pub band on weekends.", "What instrument do I play?"),
    ("My car is an old green Volvo estate from 2004.",
     "My dad drives a red Toyota pickup.", "What car do I drive?"),
    ("My best friend Tomas lives in Riga and works as a carpenter.",
     "Tomasz from work lives in Gdansk.", "Where does my best friend live?"),
    ("I'm learning Japanese with an app every morning before work.",
     "My roommate is learning Portuguese at evening classes.", "Which language am I learning?"),
]
# (first statement, correction, question)
_CORRECTIONS = [
    ("I live in Paris, in a tiny flat near the canal.",
     "Actually I moved to Lyon last month, the new flat is much bigger.", "Which city do I live in now?"),
    ("I work as a nurse at the city hospital.",
     "Actually I quit the hospital, I'm a school teacher now.", "What is my job now?"),
    ("My partner's name is Sam, we met at university.",
     "Sam and I broke up. I'm seeing someone called Noor now.", "Who am I dating now?"),
    ("I'm vegetarian, have been for years.",
     "Actually I'm fully vegan now, no more cheese.", "What is my diet now?"),
]
# (event said relatively, what is asked about it)
_EVENTS = [
    ("I went to the dentist {when} and got a filling.", "When did I get a filling at the dentist?"),
    ("I ran my first half marathon {when}, finished in two hours.", "When did I run my half marathon?"),
    ("We adopted a kitten named Miso {when}.", "When did we adopt Miso?"),
    ("I had my job interview at the museum {when}.", "When was my museum interview?"),
    ("My grandmother turned ninety {when}, we had a big party.", "When did my grandmother turn ninety?"),
    ("I broke my wrist skateboarding {when}.", "When did I break my wrist?"),
]
_RELATIVE = ["yesterday", "last Tuesday", "two days ago", "last weekend"]
# fmt: on


def synthetic_dialogue(exchanges: int = 2500, *, seed: int = 7) -> Dialogue:
    """One user's long history: small talk everywhere, the facts, corrections and events planted in it."""
    rng = random.Random(seed)
    user = "synthetic-user"
    start = datetime(2023, 1, 2, 9, 0, tzinfo=UTC)
    lines: list[dict[str, Any]] = []
    questions: list[Question] = []
    planted: dict[int, tuple[str, str, str | None]] = {}  # slot -> (user text, kind, question)
    slots = iter(rng.sample(range(exchanges), exchanges))

    for statement, distractor, question in _FACTS:
        planted[next(slots)] = (statement, "fact", question)
        for _ in range(6):  # look-alikes: the near-duplicate that must not win
            planted[next(slots)] = (distractor, "distractor", None)
    for first, correction, question in _CORRECTIONS:
        early, late = sorted((next(slots), next(slots)))
        planted[early] = (first, "distractor", None)
        planted[late] = (correction, "correction", question)
    for template, question in _EVENTS:
        planted[next(slots)] = (template.format(when=rng.choice(_RELATIVE)), "relative-date", question)

    for slot in range(exchanges):
        at = start + timedelta(hours=7 * slot + rng.randint(0, 3))
        text, kind, asked = planted.get(slot) or (_small_talk(rng), "filler", None)
        user_id, reply_id = f"s{slot}u", f"s{slot}a"
        lines.append(_line(user_id, "user", text, at, user))
        lines.append(_line(reply_id, "assistant", rng.choice(_REPLIES), at + timedelta(minutes=1), user))
        if asked is None:
            continue
        if kind == "relative-date":
            # Asked by calendar date: the message itself only says "yesterday" or "last weekend".
            day = at.strftime("%d %B %Y").lstrip("0")
            questions.append(Question(f"What happened to me around {day}?", (user_id,), kind))
        questions.append(Question(asked, (user_id,), "near-duplicate" if kind == "fact" else kind))
    return Dialogue(name="synthetic", user_id=user, personality_name="Mira", lines=lines, questions=questions)


def _small_talk(rng: random.Random) -> str:
    return rng.choice(_SMALL_TALK).format(
        food=rng.choice(_FOODS),
        weather=rng.choice(_WEATHER),
        project=rng.choice(_PROJECTS),
        genre=rng.choice(_GENRES),
    )


def _line(message_id: str, role: str, text: str, at: datetime, user: str) -> dict[str, Any]:
    return {"id": message_id, "role": role, "user_id": user, "content": text, "timestamp": at.isoformat()}
