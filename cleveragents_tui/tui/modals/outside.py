"""Keep, discard or cancel: files changed outside the plan in sandboxes a revert rolls back
(engine/core/reconcile.py, docs/reconciliation.md). Asked after the impact preview's warnings;
the focus starts on Cancel, so Enter alone never discards anyone's edits."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.widgets import Button

from cleveragents_tui.domain.wording import counted
from cleveragents_tui.engine.core.reconcile import OutsideChanges, OutsideChoice
from cleveragents_tui.tui.modals.base import WarningDialog


def outside_text(changes: tuple[OutsideChanges, ...]) -> str:
    count = sum(len(c.paths) for c in changes)
    listed = "\n".join(f"  {c.summary(limit=50)}" for c in changes)
    return (
        f"{counted(count, 'file')} changed outside the plan, in sandboxes this revert rolls back:\n"
        f"{listed}\n\n"
        "Keep: put them back on top of the rolled-back state, before the replay (the replay "
        "may write over a file it writes too).\n"
        "Discard: they are rolled back with the sandbox."
    )


class OutsideChangesModal(WarningDialog[OutsideChoice | None]):
    """Dismisses with the choice, or None to cancel the correction."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("k", "answer('keep')", "Keep", id="outside.keep"),
        Binding("d", "answer('discard')", "Discard", id="outside.discard"),
        Binding("n,escape", "answer(None)", "Cancel", id="outside.cancel"),
    ]
    SAFE = "cancel"

    def __init__(self, changes: tuple[OutsideChanges, ...]) -> None:
        super().__init__("Files changed outside the plan", outside_text(changes))

    def buttons(self) -> list[Button]:
        return [
            Button("Keep them (k)", id="keep", variant="primary"),
            Button("Discard them (d)", id="discard", variant="error"),
            Button("Cancel (N)", id="cancel"),
        ]

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.action_answer(event.button.id if event.button.id != "cancel" else None)

    def action_answer(self, choice: str | None) -> None:
        self.dismiss(OutsideChoice(choice) if choice else None)
