"""Edit a strategy decision before Execute: pick one of the alternatives the strategy actor
considered, or type another (then the impact preview, as for any correction)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Input, Label, RadioButton, RadioSet, Static

from cleveragents_tui.tui.modals.base import FormDialog
from cleveragents_tui.tui.render import safe_text


class StrategyDialog(FormDialog[str]):
    """Dismisses with the new strategy text, or None when cancelled."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="strategy.cancel")
    ]

    def __init__(self, question: str, chosen: str, alternatives: tuple[str, ...]) -> None:
        super().__init__("Edit the strategy before Execute")
        self.question = question
        self.chosen = chosen
        self.alternatives = alternatives

    def compose_form(self) -> ComposeResult:
        yield Static(safe_text(self.question), markup=False)
        yield Static(safe_text(f"now: {self.chosen}"), markup=False)
        if self.alternatives:
            yield Label("Take instead")
            with RadioSet(id="alternatives"):
                for number, text in enumerate(self.alternatives):
                    yield RadioButton(safe_text(text), value=number == 0, id=f"alt-{number}")
        yield Label("…or describe another strategy (this wins when not empty)")
        yield Input(placeholder="e.g. a greeter class with one method per language", id="own")

    def on_mount(self) -> None:
        self.query_one("#alternatives" if self.alternatives else "#own").focus()

    def submit(self) -> None:
        own = self.query_one("#own", Input).value.strip()
        if own:
            self.dismiss(own)
            return
        if self.alternatives:
            picked = self.query_one(RadioSet).pressed_index
            self.dismiss(self.alternatives[max(picked, 0)])
            return
        self.missing("Nothing to take instead: describe the strategy you want.")
