"""The look every dialog of the app shares: a centred box with its buttons on the right.
Subclasses set only what differs (Textual type selectors match subclasses, and a subclass's
DEFAULT_CSS wins over its base's)."""

from __future__ import annotations

from typing import TypeVar

from textual.screen import ModalScreen
from textual.widgets import Button, Input

from cleveragents_tui.tui.widgets.keys_footer import KeysFooter

ResultT = TypeVar("ResultT")


class Dialog(ModalScreen[ResultT]):
    DEFAULT_CSS = """
    Dialog { align: center middle; }
    Dialog > Vertical {
        width: 90; max-width: 95%; height: auto; max-height: 95%;
        border: thick $accent; background: $surface; padding: 1 2;
    }
    Dialog RadioSet { width: 100%; height: auto; }
    Dialog Horizontal { height: auto; align-horizontal: right; margin-top: 1; }
    Dialog Button { margin-left: 2; }
    Dialog .dialog-error { color: $error; height: auto; }
    """

    def on_mount(self) -> None:
        """Each dialog shows its own keys in a footer of its own: the screen's footer
        underneath lists keys that do not act while the dialog is open."""
        self.mount(KeysFooter())


class FormDialog(Dialog[ResultT | None]):
    """A dialog that asks for input: Enter in a field or the ``#preview`` button submits
    (:meth:`submit`, which dismisses with the result or shows what is missing); any other
    button, or Esc through ``action_cancel``, dismisses with None."""

    def submit(self) -> None:
        raise NotImplementedError

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "preview":
            self.submit()
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)
