"""Composing an answer: the opening from the store's data, comparisons, retrieval, the model's prompt."""
