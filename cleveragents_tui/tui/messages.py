"""Messages the app posts between widgets, screens and worker threads.

Worker threads never touch widgets: they post one of these and the handler (on the event
loop) updates the screen.
"""

from __future__ import annotations

from textual.message import Message

from cleveragents_tui.domain.checkpoint import CheckpointGroup
from cleveragents_tui.domain.views import DecisionExplanation


class StoreChanged(Message):
    """Another process (or this one) changed the store: refresh what is shown."""


class DecisionLoaded(Message):
    """The details of a decision, read in a worker thread."""

    def __init__(self, explanation: DecisionExplanation, group: CheckpointGroup | None) -> None:
        self.explanation = explanation
        self.group = group
        super().__init__()


class DecisionFailed(Message):
    def __init__(self, decision_id: str, error: str) -> None:
        self.decision_id = decision_id
        self.error = error
        super().__init__()
