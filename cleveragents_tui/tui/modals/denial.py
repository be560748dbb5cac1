"""After a denial: the plan is paused, not cancelled; pick what comes next (engine/run/denial.py)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from cleveragents_tui.engine.run.denial import Denial
from cleveragents_tui.tui.modals.base import Dialog
from cleveragents_tui.tui.render import safe_text

CHOOSE = "choose:"  # + the 1-based alternative
GUIDANCE = "guidance"
CORRECT = "correct"
AGAIN = "again"
APPLY = "apply"
CANCEL = "cancel"


OPENS_THE_PLAN = "opens the plan, select it and press c"


def _choice_ids(denial: Denial, correct_how: str) -> list[tuple[str, str]]:
    """(id, label) of each choice the denial offers, alternatives spelled out; ``correct_how``
    says how the correction is then made."""
    found: list[tuple[str, str]] = []
    for choice in denial.choices:
        command = choice.command
        if "--choose N" in command and "plan resume" in command:
            found += [
                (f"{CHOOSE}{n}", f"take alternative {n}: {option}")
                for n, option in enumerate(denial.alternatives, 1)
            ]
        elif "--guidance" in command and "plan resume" in command:
            found.append((GUIDANCE, "give guidance for this decision…"))
        elif "plan correct" in command and "--choose N" not in command:
            what = choice.what.split(" (")[0]  # without the CLI's hint
            found.append((CORRECT, f"{what}: {correct_how}"))
        elif "plan apply" in command:
            found.append((APPLY, choice.what))
        elif "plan resume" in command:
            found.append((AGAIN, f"{choice.what} (resume the plan)"))
        elif "plan cancel" in command:
            found.append((CANCEL, choice.what))
    return found


class DenialModal(Dialog[str | None]):
    """Dismisses with the id of the choice, or None (Esc): the plan stays paused."""

    DEFAULT_CSS = """
    DenialModal OptionList { height: auto; max-height: 16; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "leave", "Leave it paused", id="denial.leave")
    ]

    def __init__(self, denial: Denial, correct_how: str = OPENS_THE_PLAN) -> None:
        super().__init__(f"Denied — plan {denial.plan.plan_id[:10]} is paused, not cancelled")
        self.denial = denial
        self.correct_how = correct_how

    def compose_body(self) -> ComposeResult:
        yield Static(safe_text(self.denial.approval.question), markup=False)
        yield Static("What next? (Esc leaves it paused)", markup=False)
        yield OptionList(
            *(
                Option(safe_text(label), id=key)
                for key, label in _choice_ids(self.denial, self.correct_how)
            ),
            id="denial-choices",
        )

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_leave(self) -> None:
        self.dismiss(None)
