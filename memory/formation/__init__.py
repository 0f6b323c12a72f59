"""Memory formation: the message log grouped into exchanges, cleaned, summarized, embedded, stored."""
