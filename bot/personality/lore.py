"""A personality's lorebook on Discord: /personality lore list, add, edit, enable and disable (a part of
PersonalityCog), for its managers, over the service the CLI's `personae personality lore` uses
(memory.owners.lore_editing.LoreService); replies are private, the lore being part of the prompt."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from discord import app_commands

from bot.interactions import Interaction, user_id_of
from bot.messages import DISCORD_LIMIT
from bot.slash_commands import MAX_CHOICES, PersonaeCog, command
from memory.errors import UserFacingError
from memory.owners.lore import MAX_CONTENT_CHARS, MAX_ENTRIES, LoreEntry
from memory.owners.lore_editing import LOGIC_WORDS, POSITION_WORDS, LoreChanges, typed_changes

# A slash command's text option holds at most 6,000 characters; the CLI takes longer texts.
MAX_TEXT_OPTION = min(6000, MAX_CONTENT_CHARS)
MAX_DEPTH_OPTION = 1000
PAGE_SIZE = 10
SHOWN_CHARS = 120  # of each entry's text in the list

POSITION_CHOICES = [app_commands.Choice(name=word, value=word) for word in POSITION_WORDS]
LOGIC_CHOICES = [app_commands.Choice(name=word, value=word) for word in LOGIC_WORDS]
# The options of add and edit, by the name of typed_changes' argument each is (`content`: "text" on
# Discord, as on the CLI); kept short, as /personality's whole tree has 4,000 characters.
ENTRY_OPTIONS = {
    "keys": "Words that activate it, comma-separated; /regex/i too",
    "content": "What the model is told while it is active",
    "secondary_keys": "Words that must (or must not: logic) come up too",
    "logic": "How secondary keys combine with keys",
    "constant": "Always active",
    "position": "Before or after the character, or at a depth",
    "depth": "Messages from the end of the history",
    "order": "Lower comes first",
    "priority": "Kept first when space is short",
    "case_sensitive": "Keys match only in their case",
    "comment": "Its name in lists",
}


def entry_line(entry: LoreEntry) -> str:
    """An entry as the list shows it: number, state, what activates it and where it goes, its text."""
    name = f"{entry.comment}: " if entry.comment else ""
    text = " ".join(f"{name}{entry.content}".split())
    text = text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"
    state = "" if entry.enabled else " · **off**"
    return f"**{entry.number}**{state} · {entry.activation or '(no keys)'} · {entry.placement}\n> {text}"


def entry_changes(options: Mapping[str, Any]) -> LoreChanges:
    """What an add or an edit changes, from its command's options (its locals: discord.py gives each
    option as an argument of its own)."""
    return typed_changes(**{name: options[name] for name in ENTRY_OPTIONS})


def entry_said(verb: str, entry: LoreEntry) -> str:
    """The reply to an add or an edit."""
    return f"{verb} lore entry **{entry.number}** ({entry.activation}, {entry.placement})."


class LoreCommands(PersonaeCog):
    """/personality lore list, add, edit, enable and disable (a part of PersonalityCog)."""

    lore = app_commands.Group(
        name="lore", description="A personality's lorebook: what it knows when words come up"
    )

    async def complete_entry(self, interaction: Interaction, current: str) -> list[app_commands.Choice[int]]:
        """The entries of the personality named so far, by number and name (for its managers)."""
        name = getattr(interaction.namespace, "personality", None)
        if not name:
            return []
        try:
            book = await self.runtime.lore.book(name, actor=user_id_of(interaction))
        except UserFacingError:
            return []
        typed = current.strip()
        return [
            app_commands.Choice(name=f"{e.number}. {e.label}"[:100], value=e.number)
            for e in book.entries
            if not typed or str(e.number).startswith(typed) or typed.casefold() in e.label.casefold()
        ][:MAX_CHOICES]

    @command(
        "list",
        "Show a personality's lore entries, by number",
        personality="The personality whose lorebook to show",
        page="Which page of entries (10 a page)",
    )
    async def lore_list(
        self, interaction: Interaction, personality: str, page: app_commands.Range[int, 1, MAX_ENTRIES] = 1
    ) -> None:
        book = await self.runtime.lore.book(personality, actor=user_id_of(interaction))
        if not book.entries:
            await interaction.response.send_message(
                f"`{personality}` has no lore yet. Add an entry with `/personality lore add`.", ephemeral=True
            )
            return
        pages = -(-len(book.entries) // PAGE_SIZE)
        page = min(page, pages)
        shown = book.entries[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
        title = f"**Lore of `{personality}`** · page {page} of {pages} ({len(book.entries)} entries)"
        more = [f"Next: `/personality lore list page:{page + 1}`."] if page < pages else []
        text = "\n".join([title, *(entry_line(e) for e in shown), *more])
        await interaction.response.send_message(text[:DISCORD_LIMIT], ephemeral=True)

    @command(
        "add", "Add a lore entry to a personality you manage", personality="The personality", **ENTRY_OPTIONS
    )
    @app_commands.choices(logic=LOGIC_CHOICES, position=POSITION_CHOICES)
    @app_commands.rename(content="text")
    async def lore_add(
        self,
        interaction: Interaction,
        personality: str,
        content: app_commands.Range[str, 1, MAX_TEXT_OPTION],
        keys: str | None = None,
        secondary_keys: str | None = None,
        logic: str | None = None,
        constant: bool | None = None,
        position: str | None = None,
        depth: app_commands.Range[int, 0, MAX_DEPTH_OPTION] | None = None,
        order: int | None = None,
        priority: int | None = None,
        case_sensitive: bool | None = None,
        comment: str | None = None,
    ) -> None:
        changes = entry_changes(locals())
        entry = await self.runtime.lore.add(personality, changes, actor=user_id_of(interaction))
        await interaction.response.send_message(entry_said("Added", entry), ephemeral=True)

    @command(
        "edit",
        "Change a lore entry: only the options given",
        personality="The personality",
        number="Its number in the lore list",
        **ENTRY_OPTIONS,
    )
    @app_commands.choices(logic=LOGIC_CHOICES, position=POSITION_CHOICES)
    @app_commands.rename(content="text")
    @app_commands.autocomplete(number=complete_entry)
    async def lore_edit(
        self,
        interaction: Interaction,
        personality: str,
        number: app_commands.Range[int, 1, MAX_ENTRIES],
        content: app_commands.Range[str, 1, MAX_TEXT_OPTION] | None = None,
        keys: str | None = None,
        secondary_keys: str | None = None,
        logic: str | None = None,
        constant: bool | None = None,
        position: str | None = None,
        depth: app_commands.Range[int, 0, MAX_DEPTH_OPTION] | None = None,
        order: int | None = None,
        priority: int | None = None,
        case_sensitive: bool | None = None,
        comment: str | None = None,
    ) -> None:
        changes = entry_changes(locals())
        entry = await self.runtime.lore.edit(personality, number, changes, actor=user_id_of(interaction))
        await interaction.response.send_message(entry_said("Changed", entry), ephemeral=True)

    async def _switch(
        self, interaction: Interaction, personality: str, number: int, *, enabled: bool
    ) -> None:
        entry = await self.runtime.lore.set_enabled(
            personality, number, enabled=enabled, actor=user_id_of(interaction)
        )
        state = "enabled" if enabled else "disabled: it never reaches the prompt"
        await interaction.response.send_message(
            f"Lore entry **{entry.number}** ({entry.label}) is {state}.", ephemeral=True
        )

    @command(
        "enable",
        "Enable a lore entry",
        personality="The personality",
        number="Its number in the lore list",
    )
    @app_commands.autocomplete(number=complete_entry)
    async def lore_enable(
        self, interaction: Interaction, personality: str, number: app_commands.Range[int, 1, MAX_ENTRIES]
    ) -> None:
        await self._switch(interaction, personality, number, enabled=True)

    @command(
        "disable",
        "Disable a lore entry: it never reaches the prompt",
        personality="The personality",
        number="Its number in the lore list",
    )
    @app_commands.autocomplete(number=complete_entry)
    async def lore_disable(
        self, interaction: Interaction, personality: str, number: app_commands.Range[int, 1, MAX_ENTRIES]
    ) -> None:
        await self._switch(interaction, personality, number, enabled=False)

    for _command in (lore_list, lore_add, lore_edit, lore_enable, lore_disable):
        lore.add_command(_command)
    del _command
