"""/memory browse's message: five of the user's memories a page, Previous/Next, and Pin/Unpin, Edit
(a modal) and Forget for the memory picked in the select menu (one tap each, so it works on mobile).

The view only shows and steers what MemoryService returns for the user who opened it; anyone else's
press is refused. Each change re-reads the page, so what the user sees is what is stored.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import discord

from bot.interactions import report_error
from bot.messages import DISCORD_LIMIT
from bot.texts import excerpt
from memory.errors import NotFoundError
from memory.service import MAX_CORRECTION_CHARS

if TYPE_CHECKING:
    from memory.service import BrowsedMemory, MemoryService

PAGE_SIZE = 5
BROWSE_TIMEOUT = 600.0
SHOWN_CHARS = 300  # of each memory on the page at most; Edit shows it whole
MIN_SHOWN_CHARS = 40
NOT_YOURS = "These memories aren't yours: `/memory browse` shows your own."


@dataclass
class BrowseListing:
    """What a browse pages through: the user's memories newest first, or the ids of a search's matches."""

    memory: MemoryService
    user_id: str
    personality_id: int | None
    title: str
    matches: list[uuid.UUID] | None = None  # None: newest first
    # A word on a memory beside its date (a reply's receipt says why the memory was chosen).
    notes: dict[uuid.UUID, str] = field(default_factory=dict)

    async def page(self, offset: int) -> tuple[list[BrowsedMemory], int]:
        """The memories at `offset` and how many the listing holds."""
        if self.matches is None:
            page = await self.memory.browse(
                user_id=self.user_id, personality_id=self.personality_id, offset=offset, limit=PAGE_SIZE
            )
            return page.memories, page.total
        shown = self.matches[offset : offset + PAGE_SIZE]
        return await self.memory.browsed(user_id=self.user_id, ids=shown), len(self.matches)

    def forgotten(self, memory_id: uuid.UUID) -> None:
        if self.matches is not None and memory_id in self.matches:
            self.matches.remove(memory_id)


def memory_line(number: int, m: BrowsedMemory, room: int, note: str = "", shown_id: str | None = None) -> str:
    """A memory as the page shows it, within `room` characters (its text cut to fit), named by
    `shown_id` (its short id, as /memory show takes it) or else its whole id."""
    marks = "".join((" 📌 pinned" if m.pinned else "", " ✏️ edited" if m.edited else ""))
    marks += f" · 🚫 {m.superseded.describe()}" if m.superseded else ""
    noted = f" · {note}" if note else ""
    named = shown_id or m.id
    header = f"**{number}.** {m.personality_name} · {m.occurred_at:%Y-%m-%d}{noted}{marks} · `{named}`"
    return f"{header}\n> {excerpt(m.content, max(MIN_SHOWN_CHARS, min(SHOWN_CHARS, room - len(header) - 3)))}"


class BrowseView(discord.ui.View):
    """One page of memories and the actions on the picked one; see the module docstring."""

    def __init__(self, listing: BrowseListing, *, owner_id: int, edit_label: str = "Edit") -> None:
        super().__init__(timeout=BROWSE_TIMEOUT)
        self.edit_label = edit_label
        self.listing = listing
        self.owner_id = owner_id
        self.offset = 0
        self.memories: list[BrowsedMemory] = []
        self.short_ids: dict[uuid.UUID, str] = {}  # the page's ids as the CLI lists them, unique prefixes
        self.total = 0
        self.selected: uuid.UUID | None = None
        self.confirming = False
        self.notice = ""
        self.picker: discord.ui.Select[BrowseView] | None = None
        self.made = ""  # how the picked memory was made (memory.service.WholeMemory.how_made)

    @property
    def edit_verb(self) -> str:
        """What the edit button does, named by its label when that is not the verb (the receipt's Wrong…)."""
        return "edit" if self.edit_label == "Edit" else f"correct ({self.edit_label})"

    @property
    def chosen(self) -> BrowsedMemory | None:
        return next((m for m in self.memories if m.id == self.selected), None)

    async def load(self) -> None:
        """Read the page at the offset again (a step back when a forget emptied the last one)."""
        self.memories, self.total = await self.listing.page(self.offset)
        while not self.memories and self.offset > 0:
            self.offset = max(0, self.offset - PAGE_SIZE)
            self.memories, self.total = await self.listing.page(self.offset)
        if self.chosen is None:
            self.selected, self.confirming = None, False
        self.short_ids = await self.listing.memory.short_ids(
            user_id=self.listing.user_id, ids=[m.id for m in self.memories]
        )
        self.made = await self._how_made(self.chosen)
        self._build()

    async def _how_made(self, chosen: BrowsedMemory | None) -> str:
        """How the picked memory was made, in a few words ("" when none is picked, or it is gone)."""
        if chosen is None:
            return ""
        try:
            whole = await self.listing.memory.whole(user_id=self.listing.user_id, memory_id=chosen.id)
        except NotFoundError:  # forgotten meanwhile, elsewhere
            return ""
        return whole.how_made

    def content(self) -> str:
        if not self.memories:
            return f"{self.notice}\nYou have no memories {self.listing.title}.".strip()
        pages = -(-self.total // PAGE_SIZE)
        title = (
            f"**Your memories** {self.listing.title} · page {self.offset // PAGE_SIZE + 1} of {pages} "
            f"({self.total} in all)"
        )
        tail = [self.notice] if self.notice else []
        chosen = self.chosen
        if chosen is None:
            tail.insert(0, f"Pick a memory below to pin, {self.edit_verb} or forget it.")
        elif self.confirming:
            number = self.memories.index(chosen) + self.offset + 1
            tail.insert(0, f"Forget memory **{number}**? This cannot be undone.")
        elif self.made:
            number = self.memories.index(chosen) + self.offset + 1
            whole = f"`/memory show memory:{self.short_ids.get(chosen.id, chosen.id)}` shows it whole."
            tail.insert(0, f"Memory **{number}**, {self.made}. {whole}")
        # The memories share what the title and the tail leave of Discord's limit.
        room = (DISCORD_LIMIT - len("\n".join([title, *tail]))) // len(self.memories) - 1
        notes = self.listing.notes
        shown = [
            memory_line(self.offset + i + 1, m, room, notes.get(m.id, ""), self.short_ids.get(m.id))
            for i, m in enumerate(self.memories)
        ]
        return "\n".join([title, *shown, *tail])[:DISCORD_LIMIT]

    def _build(self) -> None:
        """The components for the current state: select, actions on the pick, then paging."""
        self.clear_items()
        if not self.memories:
            return
        select: discord.ui.Select[BrowseView] = discord.ui.Select(
            custom_id="personae:browse:pick", placeholder="Pick a memory", row=0
        )
        for number, m in enumerate(self.memories, start=self.offset + 1):
            select.add_option(
                label=f"{number}. {m.personality_name} · {m.occurred_at:%Y-%m-%d}"[:100],
                value=str(m.id),
                description=excerpt(m.content, 100),
                emoji="📌" if m.pinned else None,
                default=m.id == self.selected,
            )
        select.callback = self.pick  # type: ignore[method-assign]
        self.add_item(select)
        self.picker = select
        chosen = self.chosen
        if self.confirming:
            self._button("Forget it", "confirm-forget", self.forget_it, discord.ButtonStyle.danger, row=1)
            self._button("Keep it", "keep", self.keep_it, discord.ButtonStyle.secondary, row=1)
        else:
            pin = "Unpin" if chosen is not None and chosen.pinned else "Pin"
            for label, name, action, style in (
                (pin, "pin", self.toggle_pin, discord.ButtonStyle.primary),
                (self.edit_label, "edit", self.edit, discord.ButtonStyle.secondary),
                ("Forget", "forget", self.forget, discord.ButtonStyle.danger),
            ):
                self._button(label, name, action, style, row=1, disabled=chosen is None)
        last = self.offset + PAGE_SIZE >= self.total
        self._button(
            "Previous",
            "previous",
            self.previous,
            discord.ButtonStyle.secondary,
            row=2,
            disabled=not self.offset,
        )
        self._button("Next", "next", self.next, discord.ButtonStyle.secondary, row=2, disabled=last)

    def _button(
        self,
        label: str,
        name: str,
        action: Any,
        style: discord.ButtonStyle,
        *,
        row: int,
        disabled: bool = False,
    ) -> None:
        button: discord.ui.Button[BrowseView] = discord.ui.Button(
            label=label, custom_id=f"personae:browse:{name}", style=style, row=row, disabled=disabled
        )
        button.callback = action  # type: ignore[method-assign]
        self.add_item(button)

    async def show(self, interaction: discord.Interaction[Any], notice: str = "") -> None:
        """Re-read the page and put it on the message this interaction came from."""
        self.notice = notice
        await self.load()
        if interaction.response.is_done():
            await interaction.edit_original_response(content=self.content(), view=self)
        else:
            await interaction.response.edit_message(content=self.content(), view=self)

    async def interaction_check(self, interaction: discord.Interaction[Any]) -> bool:
        if interaction.user.id != self.owner_id:
            await interaction.response.send_message(NOT_YOURS, ephemeral=True)
            return False
        return True

    async def on_error(
        self, interaction: discord.Interaction[Any], error: Exception, item: discord.ui.Item[Any]
    ) -> None:
        await report_error(interaction, error, "Memory browse")

    # ------------------------------------------------------------------------- actions

    async def pick(self, interaction: discord.Interaction[Any]) -> None:
        assert self.picker is not None
        self.selected, self.confirming = uuid.UUID(self.picker.values[0]), False
        await self.show(interaction)

    async def toggle_pin(self, interaction: discord.Interaction[Any]) -> None:
        chosen = self.chosen
        assert chosen is not None  # the button is disabled until a memory is picked
        await self.listing.memory.set_pinned(
            user_id=self.listing.user_id, memory_id=chosen.id, pinned=not chosen.pinned
        )
        await self.show(
            interaction,
            "Unpinned." if chosen.pinned else "Pinned: recalled ahead of other memories when it matters.",
        )

    async def edit(self, interaction: discord.Interaction[Any]) -> None:
        chosen = self.chosen
        assert chosen is not None
        if len(chosen.content) > MAX_CORRECTION_CHARS:
            await interaction.response.send_message(
                f"That memory is longer than Discord's {MAX_CORRECTION_CHARS}-character text box; "
                "it can't be edited here.",
                ephemeral=True,
            )
            return
        await interaction.response.send_modal(CorrectionModal(self, chosen))

    async def forget(self, interaction: discord.Interaction[Any]) -> None:
        self.confirming = True
        await self.show(interaction)

    async def keep_it(self, interaction: discord.Interaction[Any]) -> None:
        self.confirming = False
        await self.show(interaction, "Kept; nothing was changed.")

    async def forget_it(self, interaction: discord.Interaction[Any]) -> None:
        chosen = self.chosen
        assert chosen is not None
        # Deleting from the index can take a moment: acknowledge the press first.
        await interaction.response.defer()
        await self.listing.memory.forget(user_id=self.listing.user_id, memory_ids=[chosen.id])
        self.listing.forgotten(chosen.id)
        self.selected, self.confirming = None, False
        await self.show(interaction, "Forgotten. It will not come back in recall.")

    async def previous(self, interaction: discord.Interaction[Any]) -> None:
        self.offset, self.selected = max(0, self.offset - PAGE_SIZE), None
        await self.show(interaction)

    async def next(self, interaction: discord.Interaction[Any]) -> None:
        self.offset, self.selected = self.offset + PAGE_SIZE, None
        await self.show(interaction)


class CorrectionModal(discord.ui.Modal, title="Correct this memory"):
    """The memory's text, prefilled; what the user submits replaces it (what was said stays kept)."""

    text: discord.ui.TextInput[CorrectionModal] = discord.ui.TextInput(
        label="What should be remembered",
        style=discord.TextStyle.paragraph,
        max_length=MAX_CORRECTION_CHARS,
        custom_id="personae:browse:correction",
    )

    def __init__(self, view: BrowseView, memory: BrowsedMemory) -> None:
        super().__init__(custom_id="personae:browse:correction-modal")
        self.text.default = memory.content
        self.browse = view
        self.memory_id = memory.id

    async def on_submit(self, interaction: discord.Interaction[Any]) -> None:
        # Embedding the new text can take a moment.
        await interaction.response.defer()
        listing = self.browse.listing
        await listing.memory.correct(
            user_id=listing.user_id, memory_id=self.memory_id, content=self.text.value
        )
        await self.browse.show(
            interaction, "Corrected: recalled with your words from now on; what was said is kept."
        )

    # discord.py's Modal reports errors without the item, narrowing BaseView's signature.
    async def on_error(self, interaction: discord.Interaction[Any], error: Exception) -> None:  # type: ignore[override]
        await report_error(interaction, error, "Memory correction")
