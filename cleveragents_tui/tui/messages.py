"""Messages the app posts between widgets, screens and worker threads (dataclasses, which
Textual supports: Message.__post_init__ sets them up).

Worker threads never touch widgets: they post one of these and the handler (on the event
loop) updates the screen.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from textual.message import Message

from cleveragents_tui.domain.approval import Approval
from cleveragents_tui.domain.checkpoint import CheckpointGroup
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.views import DecisionExplanation, PlanSummary, TreeRow
from cleveragents_tui.engine.read.tui_queries import EventView, Progress
from cleveragents_tui.tui.widgets.decision_tree import TreeIndex


class StoreChanged(Message):
    """Another process (or this one) changed the store: refresh what is shown."""


@dataclass
class DecisionLoaded(Message):
    """The details of a decision, read in a worker thread."""

    explanation: DecisionExplanation
    group: CheckpointGroup | None


@dataclass
class DecisionFailed(Message):
    decision_id: str
    error: str


@dataclass(frozen=True)
class Watermark:
    """How far the rows behind a shown tree go: a refresh reads only the decisions recorded
    after ``through``, and reads the whole tree again only when the plan's counts say that
    something but appends changed (decisions are append-only, superseded once)."""

    rows: int = 0  # decisions read, superseded ones included
    superseded: int = 0  # of those, superseded when read
    through: int = -1  # the highest sequence number read

    def plus(self, rows: list[TreeRow]) -> Watermark:
        """With ``rows`` read too, recorded after ``through`` (in sequence order)."""
        return Watermark(
            self.rows + len(rows),
            self.superseded + sum(row.superseded_by is not None for row in rows),
            rows[-1].sequence_number if rows else self.through,
        )


@dataclass(frozen=True)
class PlanData:
    """Everything the plan screen shows, read together in one worker."""

    plan: Plan
    show_superseded: bool
    pending: list[Approval]
    events: list[EventView]
    index: TreeIndex  # the tree arranged for the widget
    base: TreeIndex | None  # the one shown when the load started
    changed: list[str] | None  # rows changed since ``base``; None: rebuild
    grown: list[str | None] | None  # child lists appended to since ``base``; None: any
    fingerprint: tuple[object, ...]  # the store's, read before the plan
    counts: tuple[int, int]  # the plan's (all, current) decisions, as its rows were read
    read: Watermark  # the rows ``index`` was built from
    partial: bool = False  # only the first decisions: the rest are being read
    goes_on_with_a_run: bool = False  # nothing left to answer: `R` takes it on

    @property
    def hidden_superseded(self) -> int:
        return 0 if self.show_superseded else self.read.superseded


@dataclass
class PlanDataLoaded(Message):
    data: PlanData


@dataclass
class PlansLoaded(Message):
    """The plan list, read in a worker thread; ``ready``: the plans that wait with nothing
    left to answer (engine/run/approvals.py)."""

    summaries: list[PlanSummary]
    ready: set[str] = field(default_factory=set)


@dataclass
class ApprovalsLoaded(Message):
    """The pending approvals of every plan, read in a worker thread; with none, the plans
    that wait with nothing left to answer (run on with `R`)."""

    approvals: list[Approval]
    ready: list[Plan] = field(default_factory=list)


@dataclass
class ProgressRead(Message):
    """A running correction's progress, read in a worker thread."""

    progress: Progress


@dataclass
class ProgressFailed(Message):
    error: str


@dataclass
class LoadFailed(Message):
    """A worker could not read the store (the plan was deleted, the database is gone)."""

    error: str
