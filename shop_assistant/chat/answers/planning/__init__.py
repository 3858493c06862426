"""Planners: a shopper's message as tool calls (``..tools``). ``rules`` reads it with patterns; ``model`` asks the
engine's model with decoding constrained to the tools' schemas, and falls back to ``rules``."""
