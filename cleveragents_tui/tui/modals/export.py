"""Ask where to export the decision tree (the suffix, .json or .png, picks the format)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Input, Static

from cleveragents_tui.tui.modals.base import Dialog


class ExportModal(Dialog[Path | None]):
    """Dismisses with the file to write, or None when cancelled."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="export.cancel")
    ]

    def __init__(self, default: Path, where: str) -> None:
        super().__init__("Export the decision tree")
        self.default, self.where = default, where

    def compose_body(self) -> ComposeResult:
        yield Static(
            f"A file name ending in .png (an image) or .json (docs/json-formats.md), "
            f"{self.where}. Enter to export, Esc to cancel.",
            markup=False,
        )
        yield Input(value=str(self.default), id="export-path")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        self.dismiss(Path(text) if text else None)  # the caller expands ~ (terminal only)

    def action_cancel(self) -> None:
        self.dismiss(None)
