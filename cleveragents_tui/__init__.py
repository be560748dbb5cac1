"""cleveragents_tui: record every decision an LLM-agent plan makes, and correct any of them."""

__version__ = "0.1.0"
