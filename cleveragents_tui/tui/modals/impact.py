"""The impact preview of a correction: what it will roll back, cancel and re-make."""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, RadioButton, RadioSet, Static

from cleveragents_tui.engine import Impact
from cleveragents_tui.engine.correct.guidance import with_choice
from cleveragents_tui.tui.modals.base import Dialog
from cleveragents_tui.tui.render import safe_text
from cleveragents_tui.tui.widgets.long_text import LongText
from cleveragents_tui.views.impact import RowOf, impact_view
from cleveragents_tui.views.rich_text import to_rich


def impact_text(impact: Impact, row_of: RowOf | None = None) -> Text:
    """What ``agents plan correct --dry-run`` prints, less the alternatives (the modal's
    buttons): the plan screen works it out in the preview's worker, as naming and sorting
    10,000 affected decisions held the event loop ~30 ms."""
    return to_rich(impact_view(impact, row_of, alternatives=False))


class ImpactModal(Dialog[bool]):
    """Dismisses with True to go on, with :attr:`impact` holding the alternative picked here
    (for a decision of the scripted reasoner: a pick is needed when the guidance selects
    none — engine/correct/guidance.py)."""

    DEFAULT_CSS = """
    ImpactModal > Vertical { width: 100; max-width: 98%; padding: 0 1; }
    ImpactModal #impact-body { height: auto; max-height: 65vh; }
    ImpactModal Horizontal { margin-top: 0; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,n", "answer(False)", "Cancel", id="impact.cancel"),
        Binding("y", "answer(True)", "Correct", id="impact.correct"),
        *(Binding(str(n), f"pick({n})", show=False) for n in range(1, 10)),
    ]

    def __init__(self, impact: Impact, text: Text | None = None) -> None:
        """``text``: :func:`impact_text` of ``impact``, worked out off the event loop with
        the plan screen's tree rows naming the affected decisions (else here, unnamed)."""
        super().__init__()
        self.impact = impact
        self.text = text if text is not None else impact_text(impact)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Impact preview", classes="modal-title")
            with VerticalScroll(id="impact-body"):
                yield LongText(self.text, id="impact-text")
                yield from self._alternatives()
            with Horizontal():
                yield Button("Correct… (y)", id="go", variant="warning")
                yield Button("Cancel (N)", id="cancel", variant="primary")

    def _alternatives(self) -> ComposeResult:
        """The corrected decision's alternatives, the one the replay takes pressed."""
        found = self.impact.alternatives
        if found is None:
            return
        yield Static(  # not a Label: as wide as its text, it was cut at the dialog's edge
            safe_text(
                f"Alternatives of step {found.key} — the replay takes the one pressed "
                "(select it, or press its number)"
            ),
            id="alternatives-heading",
        )
        with RadioSet(id="alternatives"):
            for number, option in enumerate(found.options, 1):
                yield RadioButton(safe_text(f"{number}. {option}"), value=number == found.selected)
        pick = (
            "Select it to take it anyway." if len(found.options) == 1 else "Pick the one to take."
        )
        notice = self._notice(pick) if found.selected is None else ""
        yield Static(notice, id="impact-pick", classes="dialog-error", markup=False)

    def _notice(self, ask: str) -> str:
        """Why a pick is needed, ``ask``, and the decisions to correct instead, if any."""
        found = self.impact.alternatives
        elsewhere = found.elsewhere if found else ()
        return (
            "The guidance selects none of these: the replay would make the same choice again. "
            + ask
            + "".join(
                f"\nIt selects {e.option!r} of {e.key} ({e.decision_id}): to take that, "
                "correct that decision instead."
                for e in elsewhere
            )
        )

    def _needs_pick(self) -> bool:
        found = self.impact.alternatives
        return found is not None and found.selected is None

    def on_mount(self) -> None:
        self.query_one("#alternatives" if self._needs_pick() else "#cancel").focus()

    def on_radio_set_changed(self, event: RadioSet.Changed) -> None:
        if event.radio_set.id == "alternatives":
            self._take(event.index + 1)

    def _take(self, number: int) -> None:
        """Make alternative ``number`` the one the replay takes."""
        found = self.impact.alternatives
        if found is not None and number != found.selected:
            picked = with_choice(found, number)
            self.impact = replace(self.impact, alternatives=picked)
            self.query_one("#impact-pick", Static).update("")

    def action_pick(self, number: int) -> None:
        """Press alternative ``number`` and take it now: the radio set's Changed message
        comes later, after a y typed right behind the number (a browser sends both at once)."""
        buttons = list(self.query("#alternatives RadioButton").results(RadioButton))
        if 1 <= number <= len(buttons):
            buttons[number - 1].value = True
            self._take(number)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.action_answer(event.button.id == "go")

    def action_answer(self, yes: bool) -> None:
        if yes and self._needs_pick():
            self.query_one("#impact-pick", Static).update(
                self._notice("Pick the alternative to take first: select it, or press its number.")
            )
            self.query_one("#alternatives").focus()
            return
        self.dismiss(yes)
