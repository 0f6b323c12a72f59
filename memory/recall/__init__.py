"""Recall: embedders, keyword vectors, the vector index (one module per backend), search, reindex."""
