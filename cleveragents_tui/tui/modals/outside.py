"""Keep, discard or cancel: files changed outside the plan in sandboxes a revert rolls back
(engine/core/reconcile.py, docs/reconciliation.md). Asked after the impact preview's warnings;
the focus starts on Cancel, so Enter alone never discards anyone's edits."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Static

from cleveragents_tui.domain.display import printable
from cleveragents_tui.engine.core.reconcile import OutsideChanges, OutsideChoice
from cleveragents_tui.tui.modals.base import Dialog


def outside_text(changes: tuple[OutsideChanges, ...]) -> str:
    count = sum(len(c.paths) for c in changes)
    listed = "\n".join(f"  {c.summary(limit=50)}" for c in changes)
    return (
        f"{count} file(s) changed outside the plan, in sandboxes this revert rolls back:\n"
        f"{listed}\n\n"
        "Keep: put them back on top of the rolled-back state, before the replay (the replay "
        "may write over a file it writes too).\n"
        "Discard: they are rolled back with the sandbox."
    )


class OutsideChangesModal(Dialog[OutsideChoice | None]):
    """Dismisses with the choice, or None to cancel the correction."""

    DEFAULT_CSS = """
    OutsideChangesModal > Vertical { max-height: 90%; border: thick $warning; }
    OutsideChangesModal #outside-text { height: auto; max-height: 60vh; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("k", "answer('keep')", "Keep", id="outside.keep"),
        Binding("d", "answer('discard')", "Discard", id="outside.discard"),
        Binding("n,escape", "answer(None)", "Cancel", id="outside.cancel"),
    ]

    def __init__(self, changes: tuple[OutsideChanges, ...]) -> None:
        super().__init__()
        self.changes = changes

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Files changed outside the plan", classes="modal-title")
            with VerticalScroll(id="outside-text"):
                yield Static(printable(outside_text(self.changes)), markup=False)
            with Horizontal():
                yield Button("Keep them (k)", id="keep", variant="primary")
                yield Button("Discard them (d)", id="discard", variant="error")
                yield Button("Cancel (N)", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.action_answer(event.button.id if event.button.id != "cancel" else None)

    def action_answer(self, choice: str | None) -> None:
        self.dismiss(OutsideChoice(choice) if choice else None)
