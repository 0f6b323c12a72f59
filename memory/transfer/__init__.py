"""Import and export: transcripts and kept chats into the message log and memories, a user's memories
out as JSONL that imports back (memory.transfer.service)."""
