"""Messages the app posts between widgets, screens and worker threads.

Worker threads never touch widgets: they post one of these and the handler (on the event
loop) updates the screen.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from cleveragents_tui.domain.approval import Approval
from cleveragents_tui.domain.checkpoint import CheckpointGroup
from cleveragents_tui.domain.views import DecisionExplanation, PlanSummary, PlanTree
from cleveragents_tui.engine.read.tui_queries import EventView, Progress
from cleveragents_tui.tui.widgets.decision_tree import TreeIndex


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


@dataclass(frozen=True)
class PlanData:
    """Everything the plan screen shows, read together in one worker."""

    tree: PlanTree
    pending: list[Approval]
    events: list[EventView]
    index: TreeIndex  # the tree arranged for the widget
    base: TreeIndex | None  # the one shown when the load started
    changed: list[str] | None  # rows changed since ``base``; None: rebuild
    fingerprint: tuple[object, ...]  # the store's, read before the plan
    counts: tuple[int, int]  # the plan's (all, current) decisions, read before its tree
    partial: bool = False  # only the first decisions: the rest are being read


class PlanDataLoaded(Message):
    def __init__(self, data: PlanData) -> None:
        self.data = data
        super().__init__()


class PlansLoaded(Message):
    """The plan list, read in a worker thread."""

    def __init__(self, summaries: list[PlanSummary]) -> None:
        self.summaries = summaries
        super().__init__()


class ApprovalsLoaded(Message):
    """The pending approvals of every plan, read in a worker thread."""

    def __init__(self, approvals: list[Approval]) -> None:
        self.approvals = approvals
        super().__init__()


class ProgressRead(Message):
    """A running correction's progress, read in a worker thread."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        super().__init__()


class ProgressFailed(Message):
    def __init__(self, error: str) -> None:
        self.error = error
        super().__init__()


class LoadFailed(Message):
    """A worker could not read the store (the plan was deleted, the database is gone)."""

    def __init__(self, error: str) -> None:
        self.error = error
        super().__init__()
