"""What the summarizer reads and what it returns: an exchange with its quoted context, and a summary
that says who wrote it (the model, or the extractive summarizer and why)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

EXTRACTIVE = "extractive"


class FallbackReason(enum.StrEnum):
    """Why a memory's summary is extractive rather than the model's."""

    NO_MODEL = "no_model"  # no summarizer model configured
    CONFIG = "config"  # authentication or configuration error: missing key, unknown model...
    UNREACHABLE = "unreachable"  # 429, 5xx, dropped connections past the retries
    TIMEOUT = "timeout"  # the model answered too slowly for LLM_TIMEOUT, even one exchange a call
    REFUSED = "refused"
    INVENTED = "invented"  # a fact in neither the user's lines nor the reply
    OTHER_USER = "other_user"  # another user's fact or words
    UNPARSEABLE = "unparseable"  # empty, or no summary to be found in the answer
    OFF_EXCHANGE = "off_exchange"  # about another exchange of the call or the context, not its own
    CUT = "cut"  # stopped before its first sentence ended (max_tokens)
    NOT_SMALLER = "not_smaller"  # summary and carried facts not smaller: the cleaned exchange is kept
    MISATTRIBUTED = "misattributed"  # one speaker's fact given to the other, or a question as a fact


@dataclass(frozen=True, slots=True)
class Quoted:
    """A line said before an exchange: who said it ("Alice (another user)"; empty for context given
    as plain text), and whether it is someone else's (another user's, or a reply to one)."""

    message_id: str
    speaker: str
    text: str
    other: bool


@dataclass(frozen=True, slots=True)
class ExchangeText:
    """One exchange as the summarizer reads it: its `Name: text` lines, the lines before it, and the
    names of its speakers."""

    text: str
    context: tuple[Quoted, ...] = ()
    names: tuple[str, ...] = ()
    message_ids: frozenset[str] = frozenset()
    owner: str = ""  # whose exchange it is: what another user's exchange in the same call is not


@dataclass(frozen=True, slots=True)
class SummaryResult:
    text: str
    summarizer: str  # the model string, or "extractive"
    reason: FallbackReason | None = None  # why extractive (None: the model's summary)
    detail: str | None = None  # the failure in one line, for reports (a config error's fix)

    @property
    def extractive(self) -> bool:
        return self.summarizer == EXTRACTIVE
