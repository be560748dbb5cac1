"""Correct a decision: the mode and the guidance (then the impact preview)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Input, Label, RadioButton, RadioSet, Static

from cleveragents_tui.domain.enums import CorrectionMode
from cleveragents_tui.tui.modals.base import FormDialog
from cleveragents_tui.tui.render import safe_text


@dataclass(frozen=True)
class CorrectionChoice:
    """What the dialog was told: the mode and the guidance (the decision is the view's)."""

    mode: CorrectionMode
    guidance: str


class CorrectionDialog(FormDialog[CorrectionChoice]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="correction.cancel")
    ]

    def __init__(
        self,
        decision_summary: str,
        blocked: tuple[str, str] | None = None,
        *,
        applied: bool = False,
    ) -> None:
        """``blocked``: (problem, fix) when the plan cannot be corrected at all (it cannot be
        replayed): said up front, and there is nothing to preview. ``applied``: the plan's
        changes have landed, so a revert would be refused: append is chosen, revert is
        disabled (so the set's cursor starts on append, the one that can be chosen), and
        why said."""
        super().__init__("Correct decision")
        self.summary = decision_summary
        self.blocked = blocked
        self.applied = applied

    def compose_form(self) -> ComposeResult:
        yield Static(safe_text(self.summary), markup=False)
        if self.blocked is not None:
            yield Static(
                f"Cannot be corrected: {self.blocked[0]}.\n{self.blocked[1]}.",
                id="correction-blocked",
                classes="dialog-error",
                markup=False,
            )
        yield Label("Mode")
        if self.applied:
            yield Static(
                "The plan is applied: its landed changes cannot be reverted, so the "
                "correction is a corrective child plan (append).",
                id="correction-applied",
                markup=False,
            )
        with RadioSet(id="mode"):
            yield RadioButton(
                "revert: roll back what depended on it, replay with the guidance",
                value=not self.applied,
                id="mode-revert",
                disabled=self.applied,
            )
            yield RadioButton(
                "append: add a corrective child plan, history untouched",
                value=self.applied,
                id="mode-append",
            )
        yield Label("Guidance: what should the decision have been?")
        yield Input(placeholder="e.g. use a greeter class", id="guidance")

    def on_mount(self) -> None:
        self.query_one("#guidance", Input).focus()

    def submit(self) -> None:
        if self.blocked is not None:
            return  # the reason is shown; only Cancel is left
        guidance = self.query_one("#guidance", Input).value.strip()
        if not guidance:
            self.missing("The guidance is empty: say what the decision should be.")
            return
        append = self.query_one("#mode-append", RadioButton).value
        mode = CorrectionMode.APPEND if append else CorrectionMode.REVERT
        self.dismiss(CorrectionChoice(mode, guidance))
