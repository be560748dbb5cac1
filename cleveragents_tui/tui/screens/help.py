"""The keys of the screen underneath and of the app."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from textual.actions import parse
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.dom import DOMNode
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

LEGEND = (
    ("S E A", "the phase the decision was made in: Strategize, Execute, Apply"),
    ("↻", "a correction: the user's guidance, or a decision a correction re-made"),
    ("✗", "superseded by a correction (shown with s)"),
    ("⚑", "has a checkpoint group: its resources can be rolled back to this point"),
    ("0.85", "the confidence the actor gave its choice"),
)


def _state(node: DOMNode, action: str) -> bool | None:
    """What ``node.check_action`` says of ``action`` now, as the footer asks it: False, the
    key cannot act and is not shown; None, shown as unavailable."""
    target, name, parameters = parse(action)
    owner = {"app": node.app, "screen": node.screen}.get(target, node) if target else node
    return owner.check_action(name, parameters)


def _rows(node: DOMNode | None) -> list[tuple[str, str]]:
    """(key as people read it, what it does) of ``node``'s own bindings that can act now
    (like the footer: `e` is not listed once the plan executes)."""
    if node is None:
        return []
    out = []
    for b in node.BINDINGS:
        if not isinstance(b, Binding) or not b.description:
            continue
        state = _state(node, b.action)
        if state is False:
            continue
        keys = ", ".join(node.app.get_key_display(Binding(k, "")) for k in b.key.split(","))
        out.append((keys, b.description + (" (not now)" if state is None else "")))
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
        for rows in (_rows(self.under), _rows(self.under.focused), _rows(self.app)):
            for key, what in rows:
                table.add_row(key, what)
            if rows:
                table.add_section()
        table.add_row("ctrl+p", "command palette: every action by name")
        legend = Table(title="Marks in the decision tree", expand=True, show_edge=False)
        legend.add_column("mark", style="bold", no_wrap=True)
        legend.add_column("means")
        for mark, meaning in LEGEND:
            legend.add_row(mark, meaning)
        with VerticalScroll():
            yield Static(table)
            yield Static(legend)
