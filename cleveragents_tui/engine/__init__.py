"""Use cases: the one API every interface calls (CLI, TUI, web, tests)."""
