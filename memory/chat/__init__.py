"""The chat path: who a message addresses, the prompt within its budget, the reply, rolling summaries."""
