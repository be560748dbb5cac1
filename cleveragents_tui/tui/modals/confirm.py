"""A y/N question; the focus starts on No, so Enter alone never confirms."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.widgets import Button

from cleveragents_tui.tui.modals.base import WarningDialog


class ConfirmModal(WarningDialog[bool]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes", id="confirm.yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm.no"),
    ]
    SAFE = "no"

    def __init__(self, question: str, title: str = "Confirm", yes: str = "Yes, proceed") -> None:
        super().__init__(title, question)
        self.yes_label = yes

    def buttons(self) -> list[Button]:
        return [
            Button(f"{self.yes_label} (y)", id="yes", variant="warning"),
            Button("No (N)", id="no", variant="primary"),
        ]

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
