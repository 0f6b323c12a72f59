"""Reading the ids a page of memories shows (/memory browse, a reply's 🧠): each memory is named by its
short id, a unique prefix of its id, as the CLI lists it; the page's select menu holds the whole ids."""

from __future__ import annotations

import re
from collections.abc import Iterable

from testkit.fake_discord import SentMessage

SHOWN_ID = r"[0-9a-f][0-9a-f-]{7,35}"  # 8 characters at least, 36 (the whole id) at most


def whole_ids(shown: Iterable[str], ids: Iterable[str]) -> list[str]:
    """Each shown id read back to the one of `ids` it starts; a prefix naming none or two fails."""
    known = list(ids)
    whole = []
    for prefix in shown:
        [named] = [i for i in known if i.startswith(prefix)]
        whole.append(named)
    return whole


def shown_ids(message: SentMessage) -> list[str]:
    """The whole ids of the memories a page shows, in its order (read back through its select menu)."""
    options = [o["value"] for c in message.components_flat if c.get("type") == 3 for o in c["options"]]
    return whole_ids(re.findall(rf"· `({SHOWN_ID})`", message.content), options)
