"""The details of the selected decision (what ``agents plan explain`` shows, and more)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from cleveragents_tui.tui.render import safe_text


class DecisionDetail(VerticalScroll):
    DEFAULT_CSS = """
    DecisionDetail { padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        yield Static(Text("Select a decision.", style="dim"), id="detail-body", markup=False)

    def show(self, text: Text) -> None:
        self.query_one("#detail-body", Static).update(safe_text(text))
        self.scroll_home(animate=False)

    @property
    def text(self) -> str:
        content = self.query_one("#detail-body", Static).content
        return str(content)
