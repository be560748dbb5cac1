"""The chat model a plan asks, and the server it asks it at (`agents plan set-model`)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Input, Static

from cleveragents_tui.tui.modals.base import Dialog

# (model, base URL): each None when left as it was
ModelChange = tuple[str | None, str | None]


class ModelModal(Dialog[ModelChange | None]):
    """Dismisses with what changed (Enter in either field), or None (Esc, or nothing
    changed)."""

    DEFAULT_CSS = """
    ModelModal > Vertical { width: 80; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="model.cancel")
    ]

    def __init__(self, plan_id: str, model: str, base_url: str | None) -> None:
        super().__init__(f"Model of plan {plan_id[:10]}")
        self.model = model
        self.base_url = base_url or ""

    def compose_body(self) -> ComposeResult:
        yield Static(
            "From the plan's next run on: its runs, a correction's replay, and the child "
            "plans that ask its model. Enter to change, Esc to cancel.",
            markup=False,
        )
        yield Static("Model (PROVIDER:MODEL)", markup=False)
        yield Input(self.model, placeholder="e.g. openai:gpt-4o-mini", id="model")
        yield Static("Server (base URL, optional)", markup=False)
        yield Input(self.base_url, placeholder="e.g. http://127.0.0.1:8080/v1", id="base-url")

    def on_mount(self) -> None:
        self.query_one("#model", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        model = self.query_one("#model", Input).value.strip()
        base_url = self.query_one("#base-url", Input).value.strip()
        changed = (
            model if model != self.model else None,
            base_url if base_url and base_url != self.base_url else None,
        )
        self.dismiss(None if changed == (None, None) else changed)

    def action_cancel(self) -> None:
        self.dismiss(None)
