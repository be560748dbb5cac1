"""The keys of the screen underneath and of the app."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static


def _rows(bindings: list[BindingType]) -> list[tuple[str, str, str]]:
    out = []
    for b in bindings:
        if isinstance(b, Binding):
            out.append((b.key, b.description or b.action, b.id or ""))
    return out


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 90; max-width: 98%; height: 90%; border: thick $accent; background: $surface;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "dismiss", "Close", id="help.close")
    ]

    def __init__(self, under: Screen[object]) -> None:
        super().__init__()
        self.under = under

    def compose(self) -> ComposeResult:
        table = Table(title="Keys", expand=True, show_edge=False)
        table.add_column("key", style="bold", no_wrap=True)
        table.add_column("does")
        table.add_column("binding id", style="dim")
        for key, what, ident in _rows(list(self.under.BINDINGS)):
            table.add_row(key, what, ident)
        table.add_section()
        for key, what, ident in _rows(list(self.app.BINDINGS)):
            table.add_row(key, what, ident)
        table.add_section()
        table.add_row("ctrl+p", "command palette: every action by name", "")
        with VerticalScroll():
            yield Static(table)
