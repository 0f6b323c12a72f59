"""Who owns what: personalities, LLM configs, user settings, channel bindings."""
