"""Actors: LangGraph strategy and execution graphs, reasoners, the tool registry (issue 5)."""
