"""Numbers, times and dates as facts: read from digits, number words and dates written out (pure).

A number is kept in one canonical form ("1,500" and "1500" are one fact; number words are read by
`text2num`: "twenty-two" is 22); a time as `h:mm`; a numeric date gives its parts (and an ISO date
its month); a month or weekday name is a date.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from text_to_num import alpha2digit

MONTHS = {
    "january": "january", "february": "february", "march": "march", "april": "april", "may": "may",
    "june": "june", "july": "july", "august": "august", "september": "september", "october": "october",
    "november": "november", "december": "december", "jan": "january", "feb": "february",
    "mar": "march", "apr": "april", "jun": "june", "jul": "july", "aug": "august", "sep": "september",
    "sept": "september", "oct": "october", "nov": "november", "dec": "december",
}  # fmt: skip
WEEKDAYS = {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}
# Weekdays shortened, when capitalized ("last Fri"); "Sat" and "Sun" are words too often.
WEEKDAY_ABBREVIATIONS = {
    "mon": "monday", "tue": "tuesday", "tues": "tuesday", "wed": "wednesday", "thu": "thursday",
    "thur": "thursday", "thurs": "thursday", "fri": "friday",
}  # fmt: skip
_MONTH_NUMBERS = [
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
    "november", "december",
]  # fmt: skip
# Months that are also everyday words: a month only when capitalized, and "May" opening a sentence
# only before a number ("May I ask" is no date).
AMBIGUOUS_MONTHS = {"may", "march", "august"}

_TIME_RE = re.compile(r"(?<![\w:.])(\d{1,2}):(\d{2})(?::(\d{2}))?(?![\d:])")
_ISO_DATE_RE = re.compile(r"(?<![\w/.-])(\d{4})-(\d{1,2})-(\d{1,2})(?![\w/-])")
_NUMERIC_DATE_RE = re.compile(r"(?<![\w/.-])(\d{1,2})([/.-])(\d{1,2})\2(\d{2,4})(?![\w/-])")
NUMBER_RE = re.compile(r"(?<![\w.,])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?!\.\d)(?!,\d{3})")
# "second" is an ordinal to text2num ("wait a second": 2nd); kept as a word.
_SECOND_RE = re.compile(r"\bsecond(s?)\b", re.IGNORECASE)
_SECOND_MARK = "\ue002"


def canonical_number(text: str) -> str:
    number = text.replace(",", "")
    if "." in number:
        number = number.rstrip("0").rstrip(".") or "0"
    return number.lstrip("0") or "0"


def canonical_time(hours: str, minutes: str, seconds: str | None) -> str:
    return f"{int(hours)}:{minutes}" + (f":{seconds}" if seconds else "")


def numbers_as_digits(text: str, *, threshold: int) -> str:
    """Number words as digits ("twenty-two" -> "22"); isolated ones only from `threshold` up."""
    if not any(c.isalpha() for c in text):
        return text
    protected = _SECOND_RE.sub(lambda m: _SECOND_MARK + m.group(1), text)
    converted: str
    try:
        converted = alpha2digit(protected, "en", threshold=threshold)
    except Exception:  # text2num is written in Rust: any odd input must not cost a memory
        converted = protected
    return converted.replace(_SECOND_MARK, "second")


def dated(text: str, numbers: set[str], dates: set[str]) -> str:
    """Numeric dates read into their parts (numbers, and the month of an ISO date), blanked."""

    def iso(match: re.Match[str]) -> str:
        year, month, day = match.groups()
        numbers.update((canonical_number(year), canonical_number(day)))
        if 1 <= int(month) <= 12:
            dates.add(_MONTH_NUMBERS[int(month) - 1])
        return " "

    def numeric(match: re.Match[str]) -> str:
        first, _, second, year = match.groups()
        numbers.update(canonical_number(part) for part in (first, second, year))
        return " "

    return _NUMERIC_DATE_RE.sub(numeric, _ISO_DATE_RE.sub(iso, text))


def timed(text: str, times: set[str]) -> str:
    def keep(match: re.Match[str]) -> str:
        times.add(canonical_time(*match.groups()))
        return " "

    return _TIME_RE.sub(keep, text)


def lowercase_dates(tokens: list[tuple[str, int, int]]) -> Iterable[str]:
    """Months and weekdays typed in lower case ("see you on monday"), bar the everyday words."""
    for word, _, _ in tokens:
        folded = word.casefold()
        if word[0].islower() and (folded in WEEKDAYS or (folded in MONTHS and len(folded) > 3)):
            month = MONTHS.get(folded)
            if month not in AMBIGUOUS_MONTHS:
                yield month or folded
