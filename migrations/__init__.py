"""Alembic migrations: the only way the schema is made."""

# The newest revision, so that a command finds the schema current without loading Alembic (~0.1 s);
# tests/models/test_migrations.py checks it is Alembic's head. A stale value is never wrong: the
# schema is then brought up to date through Alembic, only more slowly.
HEAD = "0013_i30_summarizer"
