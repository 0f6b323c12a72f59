"""What is noise in chat text, and its removal: roleplay formatting, chat-template control tokens, and
the wrapping an LLM puts around its answer (pure, no I/O).

Every regex here is linear on any input: content classes exclude their own closing delimiter, repeats
are bounded or split into disjoint chunks, and no quantifier nests over an ambiguous one. Many callers
run these on raw user input, so they must never raise and never make the text longer.
"""

from __future__ import annotations

import re
from types import ModuleType

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
# Where emoji can be: runs of non-ASCII characters, with a keycap's leading digit, `#` or `*`. The emoji
# library's scan costs per character, so it reads only these (~2 ms less per exchange of chat).
_EMOJI_SPAN_RE = re.compile(r"[0-9#*]?[^\x00-\x7f]+")
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


def _emoji() -> ModuleType:
    # Imported on first use: loading its emoji data takes ~0.15 s, which commands that clean no text
    # (recall, the chat's start) should not pay.
    import emoji

    return emoji


def _drop_emoji(match: re.Match[str]) -> str:
    dropped: str = _emoji().replace_emoji(match.group(), replace=" ")
    return dropped


def _is_shortcode(name: str) -> bool:
    # Any lettered name may be a server's custom emoji; digit-only ones (`:100:`) only if real.
    return any(c.isalpha() for c in name) or _emoji().emojize(f":{name}:", language="alias") != f":{name}:"


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
        text = _EMOJI_SPAN_RE.sub(_drop_emoji, text)
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


# --- Transcripts ------------------------------------------------------------------------------------

# `Name: text` at a line's start, as `memory.formation.exchanges.render_lines` writes it (a name of
# at most LABEL_MAX_WORDS words).
SPEAKER_LABEL_RE = re.compile(r"([^\s:.!?,][^\n:.!?,]{0,39}?)[ \t]*:(?:[ \t]+|$)")
LABEL_MAX_WORDS = 4


def speaker_label(line: str) -> re.Match[str] | None:
    """The `Name:` label opening a transcript line, or None."""
    label = SPEAKER_LABEL_RE.match(line)
    return label if label is not None and len(label.group(1).split()) <= LABEL_MAX_WORDS else None


def clean_transcript(text: str) -> str:
    """A `Name: text` transcript cleaned of template tokens and roleplay noise, line by line.

    Nothing said is lost: a line that cleaning would leave empty, or with only its speaker's label
    (an emoji-only message, a lone *action*), is kept as said: "User: 👍" is an answer, and
    "User: | Sage:" remembers nothing.
    """
    kept = []
    for line in strip_chat_template_tokens(text).split("\n"):
        cleaned = strip_roleplay_formatting(line)
        label = speaker_label(cleaned) if speaker_label(line) else None
        said = cleaned[label.end() :] if label is not None else cleaned
        if said.strip():
            kept.append(cleaned)
        elif line.strip():
            kept.append(" ".join(line.split()))
    return "\n".join(kept)


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
# A code point of the surrogate range in a `str` is always a lone half (a pair decodes to one code
# point): JSON may carry one (`"\ud83d"`), and UTF-8 cannot encode it, so the embedder would fail.
_LONE_SURROGATE_RE = re.compile("[\ud800-\udfff]")
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
    """Strip template tokens, reasoning, lead-ins like "Summary:", wrapping quotes, lone surrogates
    and NULs from an LLM answer (either would stop the memory at its embedding or its row, every pass)."""
    text = _drop_reasoning(
        strip_chat_template_tokens(_LONE_SURROGATE_RE.sub("", text.replace("\x00", "")))
    ).strip()
    for _ in range(8):  # "Sure! Here is the summary:\n\nSummary: ..." needs several rounds
        before = text
        text = _unwrap_quotes(_LEAD_IN_RE.sub("", text, count=1).strip())
        if text == before:
            break
    return text
