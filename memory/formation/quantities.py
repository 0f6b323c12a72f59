"""Numbers, times and dates as facts: read from digits, number words and dates written out (pure).

A number is kept in one canonical form ("1,500" and "1500" are one fact; number words are read by
`text2num`: "twenty-two" is 22); a time as `h:mm`; a numeric date gives its parts (and an ISO date
its month); a month or weekday name is a date.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

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
# Months and weekdays in the other languages the checks read, as their English names. German ones
# are capitalized like English ones; Spanish and French ones are written in lower case.
_FOREIGN_MONTHS_TEXT = """januar:january februar:february märz:march april:april mai:may juni:june
    juli:july oktober:october dezember:december enero:january febrero:february marzo:march
    abril:april mayo:may junio:june julio:july agosto:august septiembre:september octubre:october
    noviembre:november diciembre:december janvier:january février:february avril:april juin:june
    juillet:july août:august septembre:september octobre:october novembre:november décembre:december"""
_FOREIGN_WEEKDAYS_TEXT = """montag:monday dienstag:tuesday mittwoch:wednesday donnerstag:thursday
    freitag:friday samstag:saturday sonnabend:saturday sonntag:sunday lunes:monday martes:tuesday
    miércoles:wednesday jueves:thursday viernes:friday sábado:saturday domingo:sunday lundi:monday
    mardi:tuesday mercredi:wednesday jeudi:thursday vendredi:friday samedi:saturday dimanche:sunday"""
FOREIGN_MONTHS = dict(pair.split(":") for pair in _FOREIGN_MONTHS_TEXT.split())
FOREIGN_WEEKDAYS = dict(pair.split(":") for pair in _FOREIGN_WEEKDAYS_TEXT.split())
MONTHS.update(FOREIGN_MONTHS)
WEEKDAY_ABBREVIATIONS.update(FOREIGN_WEEKDAYS)
# Scripts without capitals: a weekday or month is found by its word, wherever it stands.
_ARABIC_WEEKDAYS = {
    "الاثنين": "monday", "الإثنين": "monday", "الثلاثاء": "tuesday", "الأربعاء": "wednesday",
    "الخميس": "thursday", "الجمعة": "friday", "السبت": "saturday", "الأحد": "sunday",
}  # fmt: skip
_JAPANESE_WEEKDAYS = {
    "月": "monday", "火": "tuesday", "水": "wednesday", "木": "thursday", "金": "friday", "土": "saturday",
    "日": "sunday",
}  # fmt: skip
_ARABIC_WEEKDAY_RE = re.compile("|".join(_ARABIC_WEEKDAYS))
_JAPANESE_WEEKDAY_RE = re.compile(r"([月火水木金土日])曜日?")
_JAPANESE_DATE_RE = re.compile(r"(\d{1,2})月(?:(\d{1,2})日)?")
_JAPANESE_TIME_RE = re.compile(r"(午前|午後)?(\d{1,2})時(?:(半)|(\d{1,2})分)?")
# Months that are also everyday words: a month only when capitalized, and "May" opening a sentence
# only before a number ("May I ask" is no date).
AMBIGUOUS_MONTHS = {"may", "march", "august"}

_TIME_RE = re.compile(r"(?<![\w:.])(\d{1,2}):(\d{2})(?::(\d{2}))?(?![\d:])")
_ISO_DATE_RE = re.compile(r"(?<![\w/.-])(\d{4})-(\d{1,2})-(\d{1,2})(?![\w/-])")
_NUMERIC_DATE_RE = re.compile(r"(?<![\w/.-])(\d{1,2})([/.-])(\d{1,2})\2(\d{2,4})(?![\w/-])")
# Not after a Latin letter, a digit or a separator; after a Japanese or Arabic letter it is a number
# ("午後3時"): those scripts write no space before one.
NUMBER_RE = re.compile(
    r"(?<![0-9A-Za-z\u00c0-\u024f_.,])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?!\.\d)(?!,\d{3})"
)
# "2:30pm", "2 pm", "11 a.m.": a time on the 24-hour clock.
_CLOCK_RE = re.compile(r"(?<![\w:.])(\d{1,2})(?::(\d{2}))?\s?([ap])\.?m\.?(?![\w])", re.IGNORECASE)
_HOUR_WORDS_TEXT = "one two three four five six seven eight nine ten eleven twelve"
_HOUR_WORDS = _HOUR_WORDS_TEXT.split()
_HOUR = r"(\d{1,2}|" + "|".join(_HOUR_WORDS) + ")"
# "half past two", "quarter past 3", "quarter to four".
_PAST_RE = re.compile(rf"\b(half|quarter|a quarter|ten|five|twenty)\s+(past|to)\s+{_HOUR}\b", re.IGNORECASE)
_PAST_MINUTES = {"half": 30, "quarter": 15, "a quarter": 15, "ten": 10, "five": 5, "twenty": 20}
# "3/3": a date (either way round) or a fraction; its numbers either way.
_SHORT_DATE_RE = re.compile(r"(?<![\w/.-])(\d{1,2})/(\d{1,2})(?![\w/-])")
# "a dozen", "half a dozen", "2 dozen" (number words are digits by then); "1.5k" may be 1500.
_DOZEN_RE = re.compile(r"\b(?:(half) a|an?|(\d+))\s+dozens?\b", re.IGNORECASE)
_THOUSANDS_RE = re.compile(r"(?<![\w.,])(\d+(?:\.\d+)?)\s?k\b", re.IGNORECASE)
# "3.000 Euro": a dot between thousands in German, Spanish and French.
_DOTTED_THOUSANDS_RE = re.compile(r"(?<![\w.,])\d{1,3}(?:\.\d{3})+(?![\d,.])")
# "second" is an ordinal to text2num ("wait a second": 2nd); kept as a word.
_SECOND_RE = re.compile(r"\bsecond(s?)\b", re.IGNORECASE)
_SECOND_MARK = "\ue002"


def canonical_number(text: str) -> str:
    """ "1,500", "1500.0" and Arabic-Indic "١٥٠٠" as "1500"."""
    number = "".join(str(int(c)) if c.isdigit() and not c.isascii() else c for c in text.replace(",", ""))
    if "." in number:
        number = number.rstrip("0").rstrip(".") or "0"
    return number.lstrip("0") or "0"


def canonical_time(hours: str, minutes: str, seconds: str | None) -> str:
    return f"{int(hours)}:{minutes}" + (f":{seconds}" if seconds else "")


def numbers_as_digits(text: str, *, threshold: int, lang: str = "en") -> str:
    """Number words of `lang` as digits ("twenty-two", "zweiundzwanzig" -> "22"), isolated ones only
    from `threshold` up; then "a dozen" and "3.000" (in German, Spanish, French) as numbers."""
    if not any(c.isalpha() for c in text):
        return text
    protected = _SECOND_RE.sub(lambda m: _SECOND_MARK + m.group(1), text)
    converted: str
    try:
        converted = alpha2digit(protected, lang, threshold=threshold)
    except Exception:  # text2num is written in Rust: any odd input must not cost a memory
        converted = protected
    return spelled_numbers(converted.replace(_SECOND_MARK, "second"), lang)


def spelled_numbers(text: str, lang: str = "en") -> str:
    """Dozens and dotted thousands ("3.000" outside English) as digits."""

    def dozen(match: re.Match[str]) -> str:
        return "6" if match.group(1) else str(12 * int(match.group(2) or 1))

    text = _DOZEN_RE.sub(dozen, text)
    if lang != "en":
        text = _DOTTED_THOUSANDS_RE.sub(lambda m: m.group().replace(".", ""), text)
    return text


def dated(text: str, numbers: set[str], dates: set[str], *, readings: bool = False) -> str:
    """Numeric dates read into their parts (numbers, and the month of an ISO date), blanked; so are
    weekdays and dates of the scripts without capitals. With `readings` (what a text holds, not the
    facts it states), a short date ("3/3") holds the month of either reading too."""

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

    def short(match: re.Match[str]) -> str:
        parts = [int(canonical_number(part)) for part in match.groups()]
        numbers.update(str(part) for part in parts)
        if readings:
            dates.update(_MONTH_NUMBERS[part - 1] for part in parts if 1 <= part <= 12)
        return " "

    def japanese(match: re.Match[str]) -> str:
        month, day = match.groups()
        if 1 <= int(canonical_number(month)) <= 12:
            dates.add(_MONTH_NUMBERS[int(canonical_number(month)) - 1])
        if day:
            numbers.add(canonical_number(day))
        return " "

    def weekday(names: dict[str, str]) -> Callable[[re.Match[str]], str]:
        def found(match: re.Match[str]) -> str:
            dates.add(names[match.group(match.lastindex or 0)])
            return " "

        return found

    text = _NUMERIC_DATE_RE.sub(numeric, _ISO_DATE_RE.sub(iso, text))
    if not text.isascii():
        text = _JAPANESE_DATE_RE.sub(japanese, text)
        text = _JAPANESE_WEEKDAY_RE.sub(weekday(_JAPANESE_WEEKDAYS), text)
        text = _ARABIC_WEEKDAY_RE.sub(weekday(_ARABIC_WEEKDAYS), text)
    return _SHORT_DATE_RE.sub(short, text)


def timed(text: str, times: set[str]) -> str:
    """Times read ("14:30", "2:30pm", "half past two", "午後3時"), blanked."""

    def keep(match: re.Match[str]) -> str:
        times.add(canonical_time(*match.groups()))
        return " "

    def clock(match: re.Match[str]) -> str:
        hours, minutes, half = int(match.group(1)), match.group(2) or "00", match.group(3).casefold()
        if hours <= 12:
            hours = hours % 12 + (12 if half == "p" else 0)
            times.add(f"{hours}:{minutes}")
        return " "

    def past(match: re.Match[str]) -> str:
        minutes, direction, hour = match.groups()
        hours = int(hour) if hour.isdigit() else _HOUR_WORDS.index(hour.casefold()) + 1
        offset = _PAST_MINUTES[minutes.casefold()]
        if direction.casefold() == "to":
            hours, offset = (hours - 1) % 12 or 12, 60 - offset
        times.add(f"{hours}:{offset:02d}")
        return " "

    def japanese(match: re.Match[str]) -> str:
        half, hour, thirty, minutes = match.groups()
        hours = int(canonical_number(hour))
        hours += 12 if half == "午後" and hours < 12 else 0
        times.add(f"{hours}:{30 if thirty else int(canonical_number(minutes or '0')):02d}")
        return " "

    text = _PAST_RE.sub(past, _CLOCK_RE.sub(clock, text))
    if not text.isascii():
        text = _JAPANESE_TIME_RE.sub(japanese, text)
    return _TIME_RE.sub(keep, text)


def time_readings(times: Iterable[str]) -> set[str]:
    """The times a text holds, read either side of noon ("2:30" and "14:30" are one time said two
    ways), and the hours of the full ones as numbers ("at 8" is "8:00")."""
    held: set[str] = set()
    for time in times:
        hours, _, rest = time.partition(":")
        hour = int(hours)
        held.add(time)
        if hour <= 12:
            held.add(f"{hour + 12}:{rest}")
        if hour > 12:
            held.add(f"{hour - 12}:{rest}")
    return held


# The same emoji said again and again ("☕️☕️☕️"): as many as it is repeated.
_REPEATED_EMOJI_RE = re.compile(r"([^\x00-\u2000\ufe0f])\ufe0f?(?:\1\ufe0f?)+")
# Words that are numbers in disguise: "a fortnight" is two weeks.
# "second" is kept a word for the facts ("wait a second"), but "came second" holds the 2 of "2nd".
_NUMBER_NOUNS = {
    "fortnight": ("2", "14"), "pair": ("2",), "couple": ("2",), "twins": ("2",), "second": ("2",),
}  # fmt: skip


def counted(text: str) -> set[str]:
    """Numbers a text says without digits or number words: a repeated emoji's count, "a fortnight"."""
    found = {str(len(m.group().replace("\ufe0f", ""))) for m in _REPEATED_EMOJI_RE.finditer(text)}
    for word in re.findall(r"[a-z]+", text.casefold()):
        found.update(_NUMBER_NOUNS.get(word, ()))
    return found


def thousands(text: str) -> set[str]:
    """The numbers "1.5k" may mean besides 1.5: 1500 (a "5k" run is 5 km)."""
    return {canonical_number(str(float(m.group(1)) * 1000)) for m in _THOUSANDS_RE.finditer(text)}


def hours_as_times(numbers: Iterable[str]) -> set[str]:
    """The full hours a bare number may be, either side of noon ("at six" is 6:00 or 18:00)."""
    return time_readings(f"{int(n)}:00" for n in numbers if n.isdigit() and 0 < int(n) <= 24)


def hour_numbers(times: Iterable[str]) -> set[str]:
    """The hours of full times ("15:00" holds "15" and "3")."""
    return {
        n for t in times if t.endswith(":00") for n in (t.split(":")[0], str(int(t.split(":")[0]) % 12 or 12))
    }


def lowercase_dates(tokens: list[tuple[str, int, int]]) -> Iterable[str]:
    """Months and weekdays typed in lower case ("see you on monday"), bar the everyday words."""
    for word, _, _ in tokens:
        folded = word.casefold()
        if word[0].islower() and folded in FOREIGN_WEEKDAYS:
            yield FOREIGN_WEEKDAYS[folded]  # "el viernes", "le samedi"
        elif word[0].islower() and (folded in WEEKDAYS or (folded in MONTHS and len(folded) > 3)):
            month = MONTHS.get(folded)
            if month not in AMBIGUOUS_MONTHS:
                yield month or folded
