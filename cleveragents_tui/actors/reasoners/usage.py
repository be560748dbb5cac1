"""What a reasoner's model calls used: the figures the plan's token and cost limits act on.

A reasoner that asks a model (the chat reasoner) implements :class:`MetersUsage`; the runner
takes its calls after each ``propose`` and records them (engine/run/policing.py), priced from the
price table (engine/core/prices.py). A reasoner without a model (the scripted one) uses nothing:
0 tokens, $0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class ModelCall:
    """One model call: ``model`` is ``provider:name`` (the price table's key)."""

    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    refused: str | None = None  # why its reply was refused, and the model asked again

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@runtime_checkable
class MetersUsage(Protocol):
    @property
    def model(self) -> str:
        """The model it asks, as ``provider:name`` (what a run waits on while it answers)."""
        ...

    def take_usage(self) -> list[ModelCall]:
        """The model calls made since the last take, oldest first (and forget them)."""
        ...
