"""screens of the agents app."""
