"""A y/N question; the focus starts on No, so Enter alone never confirms."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Static

from cleveragents_tui.tui.modals.base import Dialog
from cleveragents_tui.tui.render import safe_text


class ConfirmModal(Dialog[bool]):
    DEFAULT_CSS = """
    ConfirmModal > Vertical { max-height: 90%; border: thick $warning; }
    ConfirmModal #confirm-text { height: auto; max-height: 60vh; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes", id="confirm.yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm.no"),
    ]

    def __init__(self, question: str, title: str = "Confirm", yes: str = "Yes, proceed") -> None:
        super().__init__()
        self.question = question
        self.title_text = title
        self.yes_label = yes

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(safe_text(self.title_text), classes="modal-title", markup=False)
            with VerticalScroll(id="confirm-text"):
                yield Static(safe_text(self.question), markup=False)
            with Horizontal():
                yield Button(f"{self.yes_label} (y)", id="yes", variant="warning")
                yield Button("No (N)", id="no", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
