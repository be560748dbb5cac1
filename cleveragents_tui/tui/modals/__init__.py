"""modals of the agents app."""
