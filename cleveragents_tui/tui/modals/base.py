"""The look every dialog of the app shares: a centred box, its heading, its body, and its
buttons on the right. Subclasses set only what differs (Textual type selectors match
subclasses, and a subclass's DEFAULT_CSS wins over its base's)."""

from __future__ import annotations

from typing import ClassVar, TypeVar

from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, RadioSet, Static

from cleveragents_tui.tui.render import safe_text
from cleveragents_tui.tui.widgets.keys_footer import KeysFooter

ResultT = TypeVar("ResultT")

# Rows under which a form (summary, mode, guidance, buttons) no longer fits with its borders
# and padding: at 80×24 its buttons were cut off below the box.
SHORT_TERMINAL = 32


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
    Dialog.-short > Vertical { padding: 0 1; }
    Dialog.-short Input { background: $panel; }
    Dialog.-short Horizontal { margin-top: 0; }
    """

    def __init__(self, heading: str = "") -> None:
        super().__init__()
        self.heading = heading

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(safe_text(self.heading), classes="modal-title", markup=False)
            yield from self.compose_body()
            buttons = self.buttons()
            if buttons:
                with Horizontal():
                    yield from buttons

    def compose_body(self) -> ComposeResult:
        """What stands between the heading and the buttons."""
        yield from ()

    def buttons(self) -> list[Button]:
        """The row of buttons at the bottom; none by default."""
        return []

    def on_mount(self) -> None:
        """Each dialog shows its own keys in a footer of its own: the screen's footer
        underneath lists keys that do not act while the dialog is open."""
        self.mount(KeysFooter())
        self._fit(self.app.size.height)

    def on_resize(self, event: events.Resize) -> None:
        self._fit(event.size.height)

    def _fit(self, height: int) -> None:
        """In a short terminal the fields, buttons and box drop their borders and padding
        (Textual's compact style), so every button stays on screen; a field keeps a shade
        of its own, or it would read as a line of the box's text."""
        short = height < SHORT_TERMINAL
        self.set_class(short, "-short")
        for field in self.query(Input).results(Input):
            field.compact = short
        for choices in self.query(RadioSet).results(RadioSet):
            choices.compact = short
        for button in self.query(Button).results(Button):
            button.compact = short


class WarningDialog(Dialog[ResultT]):
    """A question whose answer can lose work: a warning border, a long question scrolls,
    and the focus starts on the button ``SAFE`` names, so Enter alone never does harm."""

    DEFAULT_CSS = """
    WarningDialog > Vertical { max-height: 90%; border: thick $warning; }
    WarningDialog #question { height: auto; max-height: 60vh; }
    """
    SAFE: ClassVar[str]  # the id of the button that changes nothing

    def __init__(self, heading: str, question: str) -> None:
        super().__init__(heading)
        self.question = question

    def compose_body(self) -> ComposeResult:
        with VerticalScroll(id="question"):
            yield Static(safe_text(self.question), markup=False)

    def on_mount(self) -> None:
        self.query_one(f"#{self.SAFE}", Button).focus()


class FormDialog(Dialog[ResultT | None]):
    """A dialog that asks for input: its fields (:meth:`compose_form`), a line saying what
    is missing, then Cancel and Preview impact. Enter in a field or the ``#preview`` button
    submits (:meth:`submit`, which dismisses with the result or calls :meth:`missing`); any
    other button, or Esc through ``action_cancel``, dismisses with None."""

    blocked: tuple[str, str] | None = None  # (problem, fix) when nothing can be submitted

    def compose_form(self) -> ComposeResult:
        raise NotImplementedError

    def compose_body(self) -> ComposeResult:
        yield from self.compose_form()
        yield Static("", id="form-error", classes="dialog-error", markup=False)

    def buttons(self) -> list[Button]:
        return [
            Button("Cancel", id="cancel"),
            Button(
                "Preview impact", id="preview", variant="primary", disabled=self.blocked is not None
            ),
        ]

    def missing(self, what: str) -> None:
        """Say what the form lacks (the dialog stays open)."""
        self.query_one("#form-error", Static).update(what)

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
