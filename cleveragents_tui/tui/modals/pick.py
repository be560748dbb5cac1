"""Pick one of a few named things (the plan's automation profile)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from cleveragents_tui.tui.modals.base import Dialog
from cleveragents_tui.tui.render import safe_text


class PickModal(Dialog[str | None]):
    """Dismisses with the id of the option picked (Enter), or None (Esc)."""

    DEFAULT_CSS = """
    PickModal OptionList { height: auto; max-height: 14; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="pick.cancel")
    ]

    def __init__(
        self, heading: str, note: str, options: list[tuple[str, str]], current: str | None
    ) -> None:
        """``options``: (id, label) of each, in the order shown; ``current`` is highlighted."""
        super().__init__(heading)
        self.note = note
        self.options = options
        self.current = current

    def compose_body(self) -> ComposeResult:
        yield Static(safe_text(self.note), markup=False)
        yield OptionList(
            *(Option(safe_text(label), id=key) for key, label in self.options), id="pick"
        )

    def on_mount(self) -> None:
        listed = self.query_one(OptionList)
        ids = [key for key, _ in self.options]
        if self.current in ids:
            listed.highlighted = ids.index(self.current)
        listed.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)
