"""What runs the model: weights and tokenizer loading, the model, attention backends, the KV-cache tensors,
the step's inputs, the sampler and, on CUDA, graphs."""
