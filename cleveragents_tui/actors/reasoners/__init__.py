"""Reasoners: the scripted default and the chat reasoner (LangChain)."""
