"""Which personality a message addresses: pure decisions over names, bindings and reply targets."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True, slots=True)
class Addressee:
    """A personality as routing sees it: its id and the names a user may call it by."""

    id: int
    name: str
    display_name: str

    @property
    def aliases(self) -> tuple[str, ...]:
        names = {self.name.casefold(), self.display_name.casefold()}
        return tuple(sorted((n for n in names if n), key=len, reverse=True))


class RouteReason(StrEnum):
    NAMED = "named"
    REPLY = "reply"
    BOUND = "bound"


@dataclass(frozen=True, slots=True)
class Route:
    personality: Addressee
    reason: RouteReason
    text: str  # the message with a leading "Name," address removed


def _name_pattern(alias: str) -> str:
    # Names may contain spaces or dashes; a name must not run into a longer word ("Lilithian").
    return re.escape(alias).replace(r"\ ", r"\s+")


def find_named(text: str, personalities: Sequence[Addressee]) -> tuple[Addressee, str] | None:
    """The personality named first in `text` (`@Name` anywhere, `Name,` or `Name:` at the start).

    Returns it with the text left once a leading address is removed.
    """
    stripped = text.strip()
    best: tuple[int, Addressee, str] | None = None
    for personality in personalities:
        for alias in personality.aliases:
            pattern = _name_pattern(alias)
            lead = re.match(rf"(?:@{pattern}(?![\w-])|{pattern}(?![\w-])\s*[,:])\s*", stripped, re.I)
            if lead is not None:
                position, rest = 0, stripped[lead.end() :].lstrip(" ,:")
            else:
                at = re.search(rf"(?<![\w@])@{pattern}(?![\w-])", stripped, re.IGNORECASE)
                if at is None:
                    continue
                position, rest = at.start(), stripped
            if best is None or position < best[0]:
                best = (position, personality, rest or stripped)
    return None if best is None else (best[1], best[2])


def route_message(
    text: str,
    *,
    personalities: Sequence[Addressee],
    bound: Sequence[Addressee] = (),
    reply_to: Addressee | None = None,
) -> Route | None:
    """The personality a message addresses, or None.

    A name wins over everything (several personalities may share a channel); then the author of the
    message being replied to; then the channel's binding (the oldest, when several are bound).
    """
    named = find_named(text, personalities)
    if named is not None:
        return Route(named[0], RouteReason.NAMED, named[1])
    if reply_to is not None:
        return Route(reply_to, RouteReason.REPLY, text.strip())
    if bound:
        return Route(bound[0], RouteReason.BOUND, text.strip())
    return None
