"""A y/N question; the focus starts on No, so Enter alone never confirms."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmModal(ModalScreen[bool]):
    DEFAULT_CSS = """
    ConfirmModal { align: center middle; }
    ConfirmModal > Vertical {
        width: 90; max-width: 95%; height: auto; max-height: 90%;
        border: thick $warning; background: $surface; padding: 1 2;
    }
    ConfirmModal #confirm-text { height: auto; max-height: 60vh; }
    ConfirmModal Horizontal { height: auto; align-horizontal: right; margin-top: 1; }
    ConfirmModal Button { margin-left: 2; }
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
            yield Static(self.title_text, classes="modal-title", markup=False)
            with VerticalScroll(id="confirm-text"):
                yield Static(self.question, markup=False)
            with Horizontal():
                yield Button(f"{self.yes_label} (y)", id="yes", variant="warning")
                yield Button("No (N)", id="no", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
