"""The Textual application (issue 7)."""
