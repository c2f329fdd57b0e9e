"""Files that are never half-written: atomic writes (atomic) and kill-safe checkpointed output (checkpoint)."""
