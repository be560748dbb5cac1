"""widgets of the agents app."""
