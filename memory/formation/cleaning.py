"""Deterministic text cleaning, key-fact checks and an extractive summarizer for memories (pure, no I/O).

Every regex here is linear on any input: content classes exclude their own closing delimiter, repeats
are bounded or split into disjoint chunks, and no quantifier nests over an ambiguous one. Many callers
run these on raw user input, so they must never raise and never make the text longer.
"""

from __future__ import annotations

import heapq
import math
import re

import emoji

# --- Protecting what must survive cleaning -------------------------------------------------------

# Private-use code points: Discord renders nothing meaningful for them, so they are safe as sentinels
# once any the user typed are dropped.
_SENTINEL_OPEN = "\ue000"
_SENTINEL_CLOSE = "\ue001"
_SENTINELS_RE = re.compile("[\ue000\ue001]")
_PLACEHOLDER_RE = re.compile("\ue000(\\d+)\ue001")

_TLDS = "com|net|org|io|gg|dev|app|ai|co|me|edu|gov|xyz|tv|info"
_PROTECTED_RE = re.compile(
    rf"""
    ```[\s\S]*?```                                          # fenced code block
    | `[^`]+`                                               # inline code
    | (?P<url>(?<![\w/])(?:https?|ftp)://[^\s<>"'`]+)       # URL with a scheme
    | (?P<www>(?<![\w@./-])www\.[^\s<>"'`]+)
    | (?<![\w.+-])[\w.+-]{{1,64}}@[\w-]{{1,63}}(?:\.[\w-]{{1,63}}){{1,8}}  # e-mail address
    | (?P<domain>(?<![\w@./-])(?:[a-z0-9](?:[a-z0-9-]{{0,61}}[a-z0-9])?\.)+(?:{_TLDS})
        (?:/[^\s<>"'`]*)?(?![\w-]))                         # bare domain such as discord.gg/abc
    | <(?:@[!&]?|\#)\d{{1,25}}>                             # user, role and channel mentions
    | <t:-?\d{{1,20}}(?::[tTdDfFR])?>                       # Discord timestamps
    | (?<![\w:])\d{{1,2}}(?::\d{{2}}){{1,2}}(?![\d:])       # clock times: never shortcodes
    """,
    re.IGNORECASE | re.VERBOSE,
)
# Trailing punctuation usually ends the sentence, not the URL.
_URL_TAIL_RE = re.compile(r"[.,;:!?'\")\]}*_]+$")


def _trim_url(url: str) -> str:
    trimmed = _URL_TAIL_RE.sub("", url)
    # Keep a closing parenthesis the URL itself opened (Wikipedia's `Foo_(bar)`).
    tail = url[len(trimmed) :]
    while tail.startswith(")") and trimmed.count("(") > trimmed.count(")"):
        trimmed, tail = trimmed + ")", tail[1:]
    return trimmed


def _protect(text: str) -> tuple[str, list[str]]:
    saved: list[str] = []

    def keep(match: re.Match[str]) -> str:
        span = match.group()
        tail = ""
        if match.lastgroup in ("url", "www", "domain"):
            trimmed = _trim_url(span)
            span, tail = trimmed, span[len(trimmed) :]
        saved.append(span)
        return f"{_SENTINEL_OPEN}{len(saved) - 1}{_SENTINEL_CLOSE}{tail}"

    return _PROTECTED_RE.sub(keep, text), saved


def _restore(text: str, saved: list[str]) -> str:
    return _PLACEHOLDER_RE.sub(lambda m: saved[int(m.group(1))], text)


# --- Roleplay noise --------------------------------------------------------------------------------

_CUSTOM_EMOJI_RE = re.compile(r"<a?:\w{1,32}:\d{1,25}>")
# **bold** and ***bold italic*** are emphasis on content (often a name): unwrap, don't drop.
_BOLD_RE = re.compile(r"(?<![\w*])(\*{2,3})(?=[^\s*])([^*\n]+?)(?<=[^\s*])\1(?![\w*])")
_UNDERLINE_RE = re.compile(r"(?<!\w)__(?=[^\s_])([^_\n]+?)(?<=[^\s_])__(?!\w)")
_DUNDER_NAME_RE = re.compile(r"[a-z0-9]+")
# One alternation so the outer marker wins: `_hugs *tightly*_` goes whole. The opening `*` must not
# follow a word character, which keeps `2*3*4` and `a*b`; `_` needs word boundaries on both sides as
# in Discord, which keeps snake_case_names.
_ACTION_RE = re.compile(
    r"(?<![\w*])\*(?=[^\s*])([^*\n]+?)(?<=[^\s*])\*(?!\*)"
    r"|(?<!\w)_(?=[^\s_])([^_\n]+?)(?<=[^\s_])_(?!\w)"
)
_EMOJI_DEBRIS_RE = re.compile(
    "[\ufe0e\ufe0f\u20e3\u200b\U0001f3fb-\U0001f3ff\U0001f1e6-\U0001f1ff\U000e0020-\U000e007f]"
    "|(?<!\\S)\u200d+|\u200d+(?!\\S)"
)
# Consecutive shortcodes (`:smile::heart:`) are one match; `(?<![\w:])` keeps `10:30:00` and `a::b`.
_SHORTCODES_RE = re.compile(r"(?<![\w:])(?::[\w+\-]{1,64}:)+(?![\w:])")
_SHORTCODE_RE = re.compile(r":([\w+\-]+):")
_EMOTICON_RE = re.compile(
    r"(?<!\S)(?:[:;=][-']?(?:[)(\]\[]+|[DPpOo3/\\|*])|[)(][-']?[:;=]|<3+|</3|\^_*\^|-_+-|[Tt]_+[Tt]|;_+;)"
    r"(?=\s|$|[.,!?])"
)
# Chunks like `h+a+` are disjoint, so the repeats cannot backtrack exponentially.
_FILLER_RE = re.compile(
    r"(?<![\w'])(?:l+o+l+(?:o+l+)*z*|lmf?a+o+|rofl+|h+a+(?:h+a+)+h*|h+e+(?:h+e+)+h*|x+d+|u+w+u+|o+w+o+)"
    r"(?![\w'])",
    re.IGNORECASE,
)
_MARK_RUN_RE = re.compile(r"[!?]{2,}")
_DOTS_RE = re.compile(r"\.{4,}")
_EMPTY_BRACKETS_RE = re.compile(r"(?<!\w)\(\s*\)|(?<!\w)\[\s*\]")
_HSPACE_RE = re.compile(r"[^\S\n]+")
_NEWLINES_RE = re.compile(r" ?\n[\s]*")
_ORPHAN_COMMA_RE = re.compile(r"(^|[:;,.!?(])[ \t]*,+", re.MULTILINE)
_SPACE_BEFORE_MARK_RE = re.compile(r" ([,.!?;:])(?=\s|$)", re.MULTILINE)
_WORDLIKE_RE = re.compile(r"\w|\ue000")


def _drop_action(match: re.Match[str]) -> str:
    content = match.group(1) if match.group(1) is not None else match.group(2)
    if not any(c.isalpha() for c in content):
        # `*5*` or `*`code`*` is emphasis on a number or code, not an action.
        return content
    kept = [m.group() for m in _PLACEHOLDER_RE.finditer(content)]
    return " " + " ".join(kept) + " " if kept else " "


def _is_shortcode(name: str) -> bool:
    # Any lettered name may be a server's custom emoji; digit-only ones (`:100:`) only if real.
    return any(c.isalpha() for c in name) or emoji.emojize(f":{name}:", language="alias") != f":{name}:"


def _drop_shortcodes(match: re.Match[str]) -> str:
    if all(_is_shortcode(name) for name in _SHORTCODE_RE.findall(match.group())):
        return " "
    return match.group()


def _unwrap_underline(match: re.Match[str]) -> str:
    content = match.group(1)
    return match.group() if _DUNDER_NAME_RE.fullmatch(content) else content


def _collapse_marks(match: re.Match[str]) -> str:
    return "?" if "?" in match.group() else "!"


def _collapse_whitespace(text: str) -> str:
    text = _HSPACE_RE.sub(" ", text)
    text = _NEWLINES_RE.sub("\n", text)
    return text.strip()


def strip_roleplay_formatting(text: str) -> str:
    """Remove roleplay noise (actions, emoji, shortcodes, filler, repeated marks), keeping facts and code.

    Returns "" when nothing but noise was there. Single newlines are kept (they separate speakers); other
    whitespace runs become one space.
    """
    if not text:
        return ""
    text, saved = _protect(_SENTINELS_RE.sub("", text))
    text = _CUSTOM_EMOJI_RE.sub(" ", text)
    text = _BOLD_RE.sub(r"\2", text)
    text = _UNDERLINE_RE.sub(_unwrap_underline, text)
    text = _ACTION_RE.sub(_drop_action, text)
    if not text.isascii():  # every emoji has a non-ASCII code point; skips a slow pass on plain text
        text = emoji.replace_emoji(text, replace=" ")
        text = _EMOJI_DEBRIS_RE.sub("", text)
    text = _SHORTCODES_RE.sub(_drop_shortcodes, text)
    text = _EMOTICON_RE.sub(" ", text)
    text = _FILLER_RE.sub(" ", text)
    text = _MARK_RUN_RE.sub(_collapse_marks, text)
    text = _DOTS_RE.sub("...", text)
    text = _EMPTY_BRACKETS_RE.sub(" ", text)
    text = _collapse_whitespace(text)
    text = _ORPHAN_COMMA_RE.sub(r"\1", text)
    text = _SPACE_BEFORE_MARK_RE.sub(r"\1", text)
    text = _collapse_whitespace(text)
    if not _WORDLIKE_RE.search(text):
        return ""
    return _restore(text, saved).strip()


# --- Chat-template control tokens ------------------------------------------------------------------

_ROLE = r"(?:system|user|assistant|model|tool|function|developer|ipython|human)"
_TEMPLATE_TOKEN = rf"""(?:
    <\|im_start\|>(?:[ \t]*{_ROLE}\b)?[ \t]*\n?
    | <\|start_header_id\|>[^<>|\n]{{0,64}}<\|end_header_id\|>[ \t]*\n?
    | <start_of_turn>(?:[ \t]*{_ROLE}\b)?[ \t]*\n?
    | <end_of_turn>
    | <[|｜][^<>|｜\n]{{1,64}}[|｜]>
    | \[/?(?:INST|SYS|SYSTEM_PROMPT|AVAILABLE_TOOLS|TOOL_CALLS|TOOL_RESULTS)\]
    | <</?SYS>>
    | </?s>
    | <(?:bos|eos|pad|unk)>
)"""
# Leading blanks only from the start of their run: a run of spaces is scanned once, not once per space.
_TEMPLATE_RUN_RE = re.compile(
    rf"(?<![ \t])[ \t]*{_TEMPLATE_TOKEN}(?:\s*{_TEMPLATE_TOKEN})*\s*", re.IGNORECASE | re.VERBOSE
)


def _replace_template_run(match: re.Match[str]) -> str:
    source = match.string
    before = source[match.start() - 1] if match.start() > 0 else ""
    after = source[match.end()] if match.end() < len(source) else ""
    if not before or not after or before.isspace():
        return ""  # the run took the whitespace after it; what came before still separates
    # Keep the words on either side apart, and turns on separate lines.
    return "\n" if "\n" in match.group() else " "


def strip_chat_template_tokens(text: str) -> str:
    """Remove chat-template control tokens (ChatML, Llama, Gemma, Mistral) and the role opening a turn."""
    if not text:
        return ""
    return _TEMPLATE_RUN_RE.sub(_replace_template_run, text).strip()


# --- Summarizer output ------------------------------------------------------------------------------

_REASONING_TAG_RE = re.compile(r"<(/?)(?:think|thinking|reasoning)>", re.IGNORECASE)
_LEAD_IN_RE = re.compile(
    r"""\A(?:
    (?:sure|okay|ok|certainly|of\ course|absolutely)[,.!]*\s+
        (?=here\b|here['’]s|below\b|(?:the\s+)?(?:summary|memory)\b)
    | (?:here(?:\s+is|['’]s|\s+are)|below\s+is)\b[^:\n]{0,80}?
        \b(?:summary|summaries|memory|memories|recap|version|notes?|rewrite)\b[^:\n]{0,60}:\s*
    | [#*_\s]*(?:(?:a|the|my|concise|short|brief|final|updated|long[-\ ]term)\s+){0,3}
        (?:summary|summaries|memory|memories|recap|tl;?dr)
        (?:\s+(?:of|for)\s+(?:the|this|our|that)\s+(?:exchange|conversation|chat|interaction|discussion))?
        [*_\s]*:[*_\s]*
    )""",
    re.IGNORECASE | re.VERBOSE,
)
_QUOTE_PAIRS = {'"': '"', "'": "'", "“": "”", "”": "”", "‘": "’", "«": "»", "»": "«", "„": "“", "「": "」"}
_INNER_APOSTROPHE_RE = re.compile(r"(?<=\w)['’](?=\w)")


def _drop_reasoning(text: str) -> str:
    # Text inside any open tag is dropped; a close tag with no open one (the open tag was part of the
    # prompt, as with DeepSeek-R1) drops everything before it.
    kept: list[str] = []
    depth = 0
    position = 0
    for tag in _REASONING_TAG_RE.finditer(text):
        if depth == 0:
            kept.append(text[position : tag.start()])
        if tag.group(1):
            if depth:
                depth -= 1
            else:
                kept.clear()
        else:
            depth += 1
        position = tag.end()
    if depth == 0:
        kept.append(text[position:])
    return "".join(kept)


def _unwrap_quotes(text: str) -> str:
    if len(text) < 2:
        return text
    close = _QUOTE_PAIRS.get(text[0])
    if close is None or text[-1] != close:
        return text
    inner = text[1:-1]
    check = _INNER_APOSTROPHE_RE.sub("", inner) if text[0] in "'‘" else inner
    if text[0] in check or close in check:
        return text  # `"Alice" and "Bob"` starts and ends with quotes without being wrapped in them
    return inner.strip()


def clean_summary_output(text: str) -> str:
    """Strip template tokens, reasoning, lead-ins like "Summary:" and wrapping quotes from an LLM answer."""
    text = _drop_reasoning(strip_chat_template_tokens(text)).strip()
    for _ in range(8):  # "Sure! Here is the summary:\n\nSummary: ..." needs several rounds
        before = text
        text = _unwrap_quotes(_LEAD_IN_RE.sub("", text, count=1).strip())
        if text == before:
            break
    return text


# --- Key facts ------------------------------------------------------------------------------------

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
# `Name: text` at a line start, as `memory.exchanges.render_lines` writes: who spoke is not a fact.
_SPEAKER_LABEL_RE = re.compile(r"^[ \t]*([^\s:.!?,][^\n:.!?,]{0,39}?)[ \t]*:(?=\s|$)", re.MULTILINE)
_POSSESSIVE_RE = re.compile(r"['’]s$", re.IGNORECASE)
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
    for match in _DATE_TIME_RE.finditer(text):
        facts.add(_fact_form(match.group()))
    text = _DATE_TIME_RE.sub(" ", text)
    for match in _NUMBER_RE.finditer(text):
        facts.add(match.group())
    capitalized: list[tuple[str, str, bool]] = []
    lowercase: set[str] = set()
    named: set[str] = set()  # capitalized somewhere a sentence does not start: a name
    for match in _WORD_RE.finditer(text):
        word = _POSSESSIVE_RE.sub("", match.group())
        key = _fact_form(word)
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
    form = _match_form(fact)
    if not form:
        return True
    before = r"(?<![\d.])" if form[0].isdigit() else r"(?<!\w)"
    after = r"(?!\d|\.\d)" if form[-1].isdigit() else r"(?!\w)"
    return re.search(before + re.escape(form) + after, summary_form) is not None


def fidelity_misses(source: str, summary: str) -> list[str]:
    """List, sorted, the key facts of `source` that `summary` lost (speaker labels are not facts)."""
    summary_form = _match_form(summary)
    return sorted(fact for fact in extract_key_facts(source) if not _fact_present(fact, summary_form))


# --- Token estimate and extractive summary ----------------------------------------------------------

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN_RE = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+|[^\w\s]")
_WORD_PIECE = 8  # characters per token inside a long word run


def _token_cost(piece: str) -> int:
    return 1 + (len(piece) - 1) // _WORD_PIECE


def approx_tokens(text: str) -> int:
    """Estimate tokens cheaply and deterministically: word runs (one per 8 characters), CJK characters
    and punctuation marks.

    Only for budgets where the model's tokenizer is not wanted (summaries, chunking, memory text); the
    chat path counts prompt tokens with litellm's tokenizer (`litellm.token_counter`) instead. Additive
    over whitespace: the estimate of two texts joined by a space is the sum of their estimates.
    """
    return sum(_token_cost(m.group()) for m in _TOKEN_RE.finditer(text))


_WHITESPACE_RUN_RE = re.compile(r"\s+")
_SENTENCE_MARKS = ".!?…"
_CLOSING_QUOTES = "\"'”’)]"
_POSITION_WEIGHT = 0.5
_FACT_WEIGHT = 2.0
_SHORT_SENTENCE_TOKENS = 4
_SHORT_SENTENCE_PENALTY = 0.5


def _split_sentences(text: str) -> list[tuple[str, str]]:
    """Return (sentence, separator before it) pairs; the separator is "\n" or " "."""
    pieces: list[tuple[str, str]] = []
    position = 0
    separator = ""
    for gap in _WHITESPACE_RUN_RE.finditer(text):
        start = gap.start()
        before = text[max(0, start - 2) : start]
        newline = "\n" in gap.group()
        ends_sentence = (bool(before) and before[-1] in _SENTENCE_MARKS) or (
            len(before) == 2 and before[0] in _SENTENCE_MARKS and before[1] in _CLOSING_QUOTES
        )
        if not (newline or ends_sentence):
            continue
        if start > position:
            pieces.append((text[position:start], separator))
        separator = "\n" if newline else " "
        position = gap.end()
    if position < len(text):
        pieces.append((text[position:], separator))
    return pieces


def _truncate_to_tokens(text: str, budget: int) -> str:
    # Skip leading punctuation so the kept part starts with a word, and always keep some of one word.
    start: int | None = None
    end = 0
    used = 0
    for match in _TOKEN_RE.finditer(text):
        piece = match.group()
        is_word = piece[0].isalnum() or piece[0] == "_"
        if start is None:
            if not is_word:
                continue
            start = match.start()
        cost = _token_cost(piece)
        if used + cost > budget:
            if end == 0:
                end = match.start() + max(1, budget - used) * _WORD_PIECE
            break
        used += cost
        end = match.end()
    if start is None:
        return ""
    kept = text[start:end]
    if end < len(text) and not text[end].isspace():
        # Cut mid-word (`don't` is three pieces): back off to the last whole word if there is one.
        space = max(kept.rfind(" "), kept.rfind("\n"))
        if space > 0:
            kept = kept[:space]
    return kept.strip()


def extractive_summary(text: str, max_tokens: int) -> str:
    """Pick the most fact-dense sentences, in their original order, within `max_tokens` (by `approx_tokens`).

    The text is cleaned first; if the cleaned text fits the budget it is returned as is, otherwise the
    result is strictly shorter than it. Non-empty whenever the cleaned text is.
    """
    cleaned = strip_roleplay_formatting(strip_chat_template_tokens(text))
    budget = max(1, max_tokens)
    if not cleaned or approx_tokens(cleaned) <= budget:
        return cleaned
    sentences = _split_sentences(cleaned)
    count = len(sentences)
    tokens = [approx_tokens(s) for s, _ in sentences]
    facts = [extract_key_facts(s) for s, _ in sentences]
    base = []
    for i in range(count):
        position = 1.0 if i == 0 else 0.5 if i == count - 1 else 1.0 / math.sqrt(i + 1)
        penalty = _SHORT_SENTENCE_PENALTY if tokens[i] < _SHORT_SENTENCE_TOKENS else 0.0
        base.append(_POSITION_WEIGHT * position - penalty)

    def gain(i: int, covered: set[str]) -> float:
        # Only facts no chosen sentence has yet: repeating a name adds nothing.
        new = len(facts[i] - covered)
        return base[i] + _FACT_WEIGHT * new / math.sqrt(max(1, tokens[i]))

    covered: set[str] = set()
    chosen: list[int] = []
    seen: set[str] = set()
    used = 0
    # Lazy greedy: a sentence's gain only falls as facts get covered, so a stale heap entry is an upper bound.
    heap = [(-gain(i, covered), i) for i in range(count)]
    heapq.heapify(heap)
    while heap and used < budget:
        stale, i = heapq.heappop(heap)
        current = gain(i, covered)
        if current < -stale - 1e-9:
            heapq.heappush(heap, (-current, i))
            continue
        key = sentences[i][0].casefold()
        if used + tokens[i] > budget or key in seen:
            continue
        seen.add(key)
        chosen.append(i)
        covered |= facts[i]
        used += tokens[i]
    if not chosen:
        wordy = [i for i in range(count) if _WORDLIKE_RE.search(sentences[i][0])]
        if not wordy:
            return _truncate_to_tokens(cleaned, budget)
        best = max(wordy, key=lambda i: (gain(i, set()), -i))
        return _truncate_to_tokens(sentences[best][0], budget)
    chosen.sort()
    parts = [sentences[chosen[0]][0]]
    parts.extend(sentences[i][1] + sentences[i][0] for i in chosen[1:])
    summary = "".join(parts)
    if len(summary) >= len(cleaned):  # unreachable while approx_tokens is additive over whitespace
        return _truncate_to_tokens(cleaned, budget)
    return summary
