"""Ask for one line of text: a reason (approvals), a search (the tree's `/`)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Input

from cleveragents_tui.tui.modals.base import Dialog


class ReasonModal(Dialog[str | None]):
    """Dismisses with the reason ("" when none was given), or None when cancelled."""

    DEFAULT_CSS = """
    ReasonModal > Vertical { width: 80; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="reason.cancel")
    ]

    def __init__(
        self,
        title: str,
        placeholder: str = "reason (optional), Enter to confirm, Esc to cancel",
        value: str = "",
    ) -> None:
        super().__init__(title)
        self.placeholder = placeholder
        self.value = value

    def compose_body(self) -> ComposeResult:
        yield Input(self.value, placeholder=self.placeholder, id="reason")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)
