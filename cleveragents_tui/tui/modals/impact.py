"""The impact preview of a correction: what it will roll back, cancel and re-make."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Static

from cleveragents_tui.engine.correction import Impact
from cleveragents_tui.tui.modals.base import Dialog


def impact_text(impact: Impact) -> Text:
    t = Text()
    t.append(f"Correct decision {impact.decision_id}", style="bold")
    t.append(f" ({impact.decision_phase.value}) of plan {impact.plan_id}\n")
    t.append("mode ", style="bold")
    t.append(f"{impact.mode.value}  ")
    t.append("tier ", style="bold")
    t.append(f"{impact.tier.value}  ")
    t.append("attempt ", style="bold")
    t.append(f"{impact.attempt} → {impact.attempt + 1}\n")
    t.append("guidance ", style="bold")
    t.append(f"{impact.guidance}\n")
    if impact.phase_change:
        t.append("phase ", style="bold")
        t.append(f"{impact.phase_change[0].value} → {impact.phase_change[1].value}\n")
    t.append(
        f"\n{len(impact.affected_decisions)} decision(s) superseded and re-made "
        "(highlighted in the tree)\n",
        style="bold",
    )
    t.append("\nchild plans\n", style="bold")
    if not impact.children:
        t.append("  -\n", style="dim")
    for child in impact.children:
        t.append(f"  {child.plan_id} {child.action} ({child.phase.value}, {child.state.value}): ")
        t.append(f"{child.outcome.value}\n", style="yellow")
    t.append("\nresources\n", style="bold")
    t.append("  rolled back        ")
    t.append(", ".join(impact.rollbackable) or "-", style="green")
    t.append("\n  cannot roll back   ")
    t.append(", ".join(impact.non_rollbackable) or "-", style="bold red")
    t.append("\n  unaffected         ")
    t.append(", ".join(impact.unaffected) or "-", style="dim")
    t.append("\n\nirreversible effects\n", style="bold")
    if not impact.irreversible:
        t.append("  -\n", style="dim")
    for effect in impact.irreversible:
        effects = f" — {', '.join(effect.side_effects)}" if effect.side_effects else ""
        t.append(f"  ⚠ {effect.tool} ({effect.invocations} invocation(s)){effects}\n", style="red")
    if impact.warnings:
        t.append(f"\n{len(impact.warnings)} warning(s) to confirm next.\n", style="bold yellow")
    return t


class ImpactModal(Dialog[bool]):
    DEFAULT_CSS = """
    ImpactModal > Vertical { width: 100; max-width: 98%; padding: 0 1; }
    ImpactModal #impact-body { height: auto; max-height: 65vh; }
    ImpactModal Horizontal { margin-top: 0; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,n", "answer(False)", "Cancel", id="impact.cancel"),
        Binding("y", "answer(True)", "Correct", id="impact.correct"),
    ]

    def __init__(self, impact: Impact) -> None:
        super().__init__()
        self.impact = impact

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Impact preview", classes="modal-title")
            with VerticalScroll(id="impact-body"):
                yield Static(impact_text(self.impact), id="impact-text", markup=False)
            with Horizontal():
                yield Button("Correct… (y)", id="go", variant="warning")
                yield Button("Cancel (N)", id="cancel", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "go")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
