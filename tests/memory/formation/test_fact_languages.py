"""Facts in every language and every way of writing them (issue 30).

A correct summary is not refused and a wrong one is, through the check the summarizer runs on every
answer (`foreign_facts` against what the exchange holds), and the facts a summary dropped are found.
"""

from __future__ import annotations

import pytest

from memory.formation.fidelity import fidelity_misses, foreign_facts, key_facts, vocabulary
from memory.formation.words import language


def _refused(exchange: str, summary: str, *names: str) -> list[str]:
    return foreign_facts(summary, vocabulary(exchange), names=names)


@pytest.mark.parametrize(
    ("exchange", "summary"),
    [
        # German: nouns are capitalized, number words read as numbers.
        (
            "Lena: Ich habe heute drei Äpfel gekauft und einen Kuchen gebacken.\nSage: Wunderbar!",
            "Lena kaufte 3 Äpfel und backte damit einen Kuchen.",
        ),
        (
            "Tim: Meine Schwester arbeitet bei der Bank, sie verdient 3000 Euro im Monat.\nSage: Gut!",
            "Die Schwester von Tim hat eine Stelle bei der Bank mit 3.000 Euro Gehalt.",
        ),
        ("Paul: Am Samstag laufe ich in Köln.\nSage: Viel Erfolg!", "Paul läuft am Samstag in Köln."),
        # Spanish and French number words, and a sentence opening with a word common in its language.
        (
            "Lucía: Mañana cumplo treinta años en Madrid.\nSage: ¡Feliz cumpleaños!",
            "Lucía cumple 30 años en Madrid.",
        ),
        (
            "Julien: Ma grand-mère fête ses quatre-vingt-dix ans en août.\nSage: Quelle belle étape !",
            "La grand-mère de Julien aura 90 ans en août.",
        ),
        # Japanese and Arabic, summarized in their own script or in English.
        (
            "Yuki: 明日の午後3時に駅で友達と会います。\nSage: 楽しんでね！",
            "ゆきは明日の午後3時に駅で友達と会う。",
        ),
        (
            "Yuki: 明日の午後3時に駅で友達と会います。\nSage: 楽しんでね！",
            "Yuki is meeting a friend at 3 pm.",
        ),
        (
            "Aoi: 来週の金曜日に東京で試験があります。8時に始まります。\nSage: 頑張って！",
            "Aoi has an exam in Tokyo next Friday at 8.",
        ),
        ("Layla: عندي ٣ قطط وكلب واحد.\nSage: بيت مليء بالحيوانات!", "Layla has 3 cats and one dog."),
        (
            "Omar: سأسافر إلى القاهرة يوم الخميس مع أخي.\nSage: رحلة سعيدة!",
            "Omar is travelling to Cairo on Thursday.",
        ),
        # English as people write it.
        (
            "Bob: bought a dozen eggs and half a dozen bagels\nSage: A picnic!",
            "Bob bought 12 eggs and 6 bagels.",
        ),
        ("Alice: the dentist moved me to half past two\nSage: Noted.", "Alice's dentist is at 14:30."),
        (
            "Bob: flight lands at 2:30pm tomorrow\nSage: Safe travels.",
            "Bob's flight lands at 14:30 tomorrow.",
        ),
        (
            "Alice: my channel just passed 1.5k subscribers\nSage: Wow!",
            "Alice's channel passed 1,500 subscribers.",
        ),
        ("Bob: rent is due 3/3\nSage: Good plan.", "Bob's rent is due on March 3."),
        ("Alice: we finished 3/4 of the quilt\nSage: Lovely.", "Alice has finished 3/4 of the quilt."),
        ("Bob: 🎉🎂🥳\nSage: 🌿✨", "Bob celebrated with party emoji."),
        ("Bob: ☕️☕️☕️\nSage: 😴", "Bob sent three coffee emoji."),
        ("Bob: our quiz team came second out of 18\nSage: Well played!", "Bob's team finished 2nd of 18."),
        ("Ida: Ich fahre heute zwanzig Kilometer.\nSage: Stark!", "Ida fährt 20 Kilometer mit dem Rad."),
        ("Greta: Ich habe den Führerschein!\nSage: Toll!", "Greta hat die Führerscheinprüfung bestanden."),
        ("Romain: Je joue au tennis chaque mardi.\nSage: Bon !", "Tous les mardis, Romain joue au tennis."),
        ("Nathan: J'ai fini en deux heures.\nSage: Bravo !", "Nathan a fini en 2 heures."),
    ],
)
def test_a_correct_summary_is_not_refused(exchange: str, summary: str) -> None:
    assert _refused(exchange, summary) == []


@pytest.mark.parametrize(
    ("exchange", "summary", "invented"),
    [
        ("Lena: Ich habe drei Äpfel gekauft.\nSage: Wunderbar!", "Lena hat fünf Äpfel gekauft.", "5"),
        (
            "Lena: Ich habe drei Äpfel gekauft.\nSage: Wunderbar!",
            "Lena und Martin haben Äpfel gekauft.",
            "martin",
        ),
        (
            "Jonas: Mein Hund Bello wurde am Montag zwölf.\nSage: Toll!",
            "Bello wurde am Freitag 12.",
            "friday",
        ),
        ("Diego: Tengo tres perros.\nSage: ¡Qué bien!", "Diego tiene cinco perros.", "5"),
        (
            "Sofía: El concierto es el viernes.\nSage: ¡Disfruta!",
            "El concierto de Sofía es el sábado.",
            "saturday",
        ),
        ("Pierre: J'ai adopté deux chats.\nSage: Super !", "Pierre a adopté trois chats.", "3"),
        (
            "Yuki: 明日の午後3時に駅で会います。\nSage: 楽しんでね！",
            "ゆきは明日の午後5時に駅で会う。",
            "17:00",
        ),
        ("Layla: عندي ٣ قطط.\nSage: رائع!", "Layla has 5 cats.", "5"),
        ("Alice: the dentist moved me to half past two\nSage: Noted.", "Alice's dentist is at 3:30.", "3:30"),
        ("Bob: rent is due 3/3\nSage: Good plan.", "Bob's rent is due on April 3.", "april"),
        ("Bob: my boss Priya approved three weeks off\nSage: Enjoy!", "Carol is his boss.", "carol"),
        (
            "Alice: Grandpa turns ninety-one on Saturday\nSage: Wow!",
            "Harold turns ninety-one on Saturday.",
            "harold",
        ),
    ],
)
def test_a_wrong_summary_is_refused(exchange: str, summary: str, invented: str) -> None:
    assert invented in _refused(exchange, summary)


def test_german_nouns_are_no_names_and_german_names_are() -> None:
    facts = key_facts("Mein Hund Bello ist am Montag zwölf Jahre alt geworden, sagt Martin.")
    assert {"bello", "martin"} <= set(facts.names)
    assert not {"hund", "jahre"} & set(facts.names)
    assert "monday" in facts.dates and "12" in facts.numbers


def test_a_dropped_spelled_fact_is_found_and_a_kept_one_is_not() -> None:
    exchange = "Bob: flight lands at 2:30pm, Leo is picking me up\nSage: Safe travels."
    assert fidelity_misses(exchange, "Bob lands at 14:30; Leo picks him up.") == []
    assert fidelity_misses(exchange, "Bob's flight lands soon.") == ["14:30", "leo"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Nonna says the secret to her ragù is 6 hours and a bay leaf; the café opens Sunday", "en"),
        ("Lukas: Unser Team hat am Sonntag vier zu eins gewonnen!", "de"),
        ("Diego: Tengo tres perros y doce gatos en la granja.", "es"),
        ("Pierre: J'ai adopté deux chats la semaine dernière.", "fr"),
    ],
)
def test_a_text_is_read_in_its_language(text: str, expected: str) -> None:
    assert language(text) == expected
