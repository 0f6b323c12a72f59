"""Key facts of a text (names, numbers, dates, times) and the ones a summary lost (pure, no I/O).

A summary that drops a fact its source had is a fidelity miss: formation then keeps the verbatim text
beside the summary, and the missed facts stay findable by keyword.
"""

from __future__ import annotations

import re

from memory.formation.cleaning import strip_chat_template_tokens

_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_ORDINAL = r"(?:st|nd|rd|th)?"
_DATE_TIME_RE = re.compile(
    rf"""
    (?<![\w/.-])\d{{4}}-\d{{1,2}}-\d{{1,2}}(?![\w/-])
    | (?<![\w/.-])\d{{1,2}}[/-]\d{{1,2}}[/-]\d{{2,4}}(?![\w/-])
    | (?<![\w/.-])\d{{1,2}}\.\d{{1,2}}\.\d{{4}}(?![\w.])
    | \b{_MONTH}\.?\s+\d{{4}}(?!\d)
    | \b{_MONTH}\.?\s+\d{{1,2}}{_ORDINAL}(?:,?\s+\d{{4}})?(?![\w:])
    | (?<![\w.,])\d{{1,2}}{_ORDINAL}\s+(?:of\s+)?{_MONTH}\b\.?(?:,?\s+\d{{4}})?(?!\d)
    | (?<![\w:])\d{{1,2}}:\d{{2}}(?::\d{{2}})?(?![\d:])
    """,
    re.IGNORECASE | re.VERBOSE,
)
_NUMBER_RE = re.compile(r"(?<![\w.,])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\d])(?!\.\d)(?!,\d{3})")
_WORD_RE = re.compile(r"[^\W\d_](?:\w|['’-](?=\w))*")
_NOT_FACTS_RE = re.compile(
    r"(?:https?|ftp)://\S+|www\.\S+|(?<![\w.+-])[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63}){1,8}"
    r"|<a?:\w{1,32}:\d{1,25}>|<(?:@[!&]?|#)\d{1,25}>|<t:-?\d{1,20}(?::\w)?>",
    re.IGNORECASE,
)
# `Name: text` at a line start, as `memory.formation.exchanges.render_lines` writes: who spoke is not a fact.
_SPEAKER_LABEL_RE = re.compile(r"^[ \t]*([^\s:.!?,][^\n:.!?,]{0,39}?)[ \t]*:(?=\s|$)", re.MULTILINE)
_ABBREVIATION_DOT_RE = re.compile(r"(?<=[^\W\d_])\.(?=\s)")
_ORDINAL_SUFFIX_RE = re.compile(r"(?<=\d)(?:st|nd|rd|th)\b", re.IGNORECASE)
_SENTENCE_END = ".!?…:\n\r"
_OPENERS = " \t\"'“”‘’(*_[«>-"
# Never facts, wherever they appear.
_NEVER_FACTS_TEXT = "i i'm i've i'll i'd user assistant ok okay lol lmao rofl haha hehe xd uwu owo omg hmm"
_NEVER_FACTS = frozenset(_NEVER_FACTS_TEXT.split())
# Capitalized only because they start a sentence (or shout); names are what's left.
_COMMON_WORDS_TEXT = """
    a an the this that these those there then so and but or nor if when what why how who whom whose
    where which yes no not oh ah aw aww ugh hey hi hello bye goodbye well thanks thank welcome please
    sure yeah yep nope wow damn dear right alright true exactly totally indeed congrats it it's its
    my your our their his her we you he she they me us them one both all some any each every many
    much more most few other another such nothing something everything anything someone everyone
    nobody somebody just also maybe still even really very actually anyway too here now today tonight
    tomorrow yesterday soon later first next last good great nice cool fine sorry glad happy is are
    was were be been am do does did done have has had can could would should will shall might must
    let let's see look wait go come tell think know love like want need get got make take give guess
    sounds seems looks feel hope remember try keep stop listen say said ask call check after before
    as at in on for to from with of by about because since though although while until into onto
    over under again once never always sometimes often perhaps probably definitely honestly besides
    meanwhile however that's there's what's it'd you're you've you'll we're they're he's she's don't
    didn't can't won't isn't aren't wasn't lovely awesome amazing wonderful perfect excellent interesting
    cute funny weird beautiful fantastic brilliant incredible terrible awful bad false seriously literally
    basically anyways whatever nah ooh uh um yay welp agreed noted understood absolutely certainly plus
"""
_COMMON_WORDS = frozenset(_COMMON_WORDS_TEXT.split())


def _fact_form(fact: str) -> str:
    return " ".join(fact.casefold().replace("’", "'").split()).rstrip(".")


def _is_sentence_initial(text: str, start: int) -> bool:
    i = start - 1
    while i >= 0 and text[i] in _OPENERS:
        i -= 1
    return i < 0 or text[i] in _SENTENCE_END


def _drop_speaker_label(match: re.Match[str]) -> str:
    return "" if len(match.group(1).split()) <= 4 else match.group()


def extract_key_facts(text: str) -> set[str]:
    """Return the case-folded names, numbers, dates and times a memory of `text` must keep."""
    text = strip_chat_template_tokens(text)
    text = _SPEAKER_LABEL_RE.sub(_drop_speaker_label, text)
    text = _NOT_FACTS_RE.sub(" ", text)
    facts: set[str] = set()
    # One pass of the costly date pattern: its matches are the facts, and blanked as `sub` would.
    kept: list[str] = []
    end = 0
    for match in _DATE_TIME_RE.finditer(text):
        facts.add(_fact_form(match.group()))
        kept += (text[end : match.start()], " ")
        end = match.end()
    if kept:
        kept.append(text[end:])
        text = "".join(kept)
    for match in _NUMBER_RE.finditer(text):
        facts.add(match.group())
    capitalized: list[tuple[str, str, bool]] = []
    lowercase: set[str] = set()
    named: set[str] = set()  # capitalized somewhere a sentence does not start: a name
    for match in _WORD_RE.finditer(text):
        word = match.group()
        # The possessive dropped (`['’]s$` ignoring case: "S" and "ſ" too), without a regex per word.
        if word[-1] in "sSſ" and len(word) > 2 and word[-2] in "'’":
            word = word[:-2]
        # `_fact_form` of a word: no character a word holds (letters, digits, _, inner apostrophes
        # and hyphens) casefolds to whitespace or a dot, so only the casefold and apostrophe remain.
        key = word.casefold().replace("’", "'")
        if not word[0].isupper():
            lowercase.add(key)
            continue
        initial = _is_sentence_initial(text, match.start())
        capitalized.append((word, key, initial))
        if not initial:
            named.add(key)
    for word, key, initial in capitalized:
        if key in _NEVER_FACTS:
            continue
        if initial and (key in _COMMON_WORDS or (key in lowercase and key not in named)):
            continue  # "Rose" opening a sentence is a flower if "rose" appears lowercase too
        if not initial and word.isupper() and key in _COMMON_WORDS:
            continue  # shouting, not a name
        facts.add(key)
    return facts


def _match_form(text: str) -> str:
    text = _ORDINAL_SUFFIX_RE.sub("", text.casefold().replace("’", "'"))
    text = _ABBREVIATION_DOT_RE.sub("", text)  # `Jan. 5` and `Jan 5`
    # Thousands separators and the comma in `March 15, 2024` are the same fact either way.
    return " ".join(text.replace(",", "").split())


def _fact_present(fact: str, summary_form: str) -> bool:
    """Whether the fact's form stands in the summary's, not inside a longer word or number.

    The boundaries are those of the regular expressions `(?<![\\d.])` / `(?<!\\w)` before and
    `(?!\\d|\\.\\d)` / `(?!\\w)` after, checked by hand: a pattern per fact missed the `re`
    module's cache (every number is new) and cost a compile each time.
    """
    form = _match_form(fact)
    if not form:
        return True
    digit_first, digit_last = form[0].isdigit(), form[-1].isdigit()
    end = len(summary_form)
    start = summary_form.find(form)
    while start >= 0:
        stop = start + len(form)
        before = summary_form[start - 1] if start else ""
        after = summary_form[stop] if stop < end else ""
        if digit_first:
            clear_before = not before or not (before.isdecimal() or before == ".")
        else:
            clear_before = not _is_word_char(before)
        if digit_last:
            clear_after = not after or not (
                after.isdecimal() or (after == "." and stop + 1 < end and summary_form[stop + 1].isdecimal())
            )
        else:
            clear_after = not _is_word_char(after)
        if clear_before and clear_after:
            return True
        start = summary_form.find(form, start + 1)
    return False


def _is_word_char(char: str) -> bool:
    """`\\w` of a `str` pattern: alphanumeric (str.isalnum) or the underscore; False for ""."""
    return char.isalnum() or char == "_"


def fidelity_misses(source: str, summary: str) -> list[str]:
    """List, sorted, the key facts of `source` that `summary` lost (speaker labels are not facts)."""
    summary_form = _match_form(summary)
    return sorted(fact for fact in extract_key_facts(source) if not _fact_present(fact, summary_form))
