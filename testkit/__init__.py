"""Test doubles that are real servers, shared by tests/ and bench/ (neither imports the other)."""
