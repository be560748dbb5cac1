"""Sandboxes: isolated copies of real resources, checkpointed at every Execute decision."""
