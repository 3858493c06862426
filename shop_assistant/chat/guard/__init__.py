"""Guarding the model's output: the answer pipeline, decoding settings and stops, continuation, sentences, the checker."""
