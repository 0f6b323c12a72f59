"""The domain: personalities chat, memories form and are recalled. Knows no Discord."""
