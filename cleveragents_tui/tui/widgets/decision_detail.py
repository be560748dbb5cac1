"""The details of the selected decision: what ``agents plan explain`` prints, the same
sections and values (cleveragents_tui/views/explain.py), styled."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from cleveragents_tui.domain.checkpoint import CheckpointGroup
from cleveragents_tui.domain.views import DecisionExplanation
from cleveragents_tui.views.explain import explanation_view
from cleveragents_tui.views.rich_text import to_rich_columns
from cleveragents_tui.views.sections import View, to_plain_text

PLACEHOLDER = "Select a decision."  # shown until a decision's details are


class DecisionDetail(VerticalScroll):
    DEFAULT_CSS = """
    DecisionDetail { padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        yield Static(Text(PLACEHOLDER, style="dim"), id="detail-body", markup=False)

    def show_explanation(self, e: DecisionExplanation, group: CheckpointGroup | None) -> None:
        """Show one decision's explanation (its control characters escaped by the view)."""
        view = explanation_view(e, group)
        self.query_one("#detail-body", Static).update(to_rich_columns(view))
        self._view = view
        self.scroll_home(animate=False)

    _view: View | None = None  # the explanation shown; None: the placeholder

    @property
    def text(self) -> str:
        """What is shown, as plain text: what ``agents plan explain`` prints (worked out
        when asked, not at each decision shown)."""
        return PLACEHOLDER if self._view is None else to_plain_text(self._view)
