"""Text field types: non-empty after stripping, and free of NUL (PostgreSQL text cannot hold it)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("text must not contain NUL characters")
    return value


def _required(value: str) -> str:
    _no_nul(value)
    if not value.strip():
        raise ValueError("must not be empty")
    return value


Text = Annotated[str, AfterValidator(_no_nul)]
RequiredText = Annotated[str, AfterValidator(_required)]
