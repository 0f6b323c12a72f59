"""The events one feature of the bot dispatches and another answers (`bot.dispatch(NAME, ...)`, heard by
`@commands.Cog.listener(f"on_{NAME}")`): named here so that neither feature imports the other."""

from __future__ import annotations

# bot.dispatch(GREETING_EVENT, channel, guild_id, personality_id, user): /personality activate asks the
# chat to greet `user` there if the conversation is new.
GREETING_EVENT = "personality_greeting"
# bot.dispatch(RECEIPT_EVENT, interaction, conversation_id, message_id): a reply's 🧠 was pressed; the
# memory cog shows the memories that reply used.
RECEIPT_EVENT = "receipt_pressed"
