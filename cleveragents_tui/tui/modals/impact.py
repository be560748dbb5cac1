"""The impact preview of a correction: what it will roll back, cancel and re-make."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from itertools import pairwise
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Label, RadioButton, RadioSet, Static

from cleveragents_tui.domain.views import TreeRow
from cleveragents_tui.engine.correction import Impact, guidance_line
from cleveragents_tui.engine.guidance import with_choice
from cleveragents_tui.tui.modals.base import Dialog
from cleveragents_tui.tui.render import one_line, safe_text

# affected decisions named in the preview at most; the rest are counted (and highlighted in
# the tree): a 10,000-decision revert still opens at once
NAMED_AT_MOST = 200

RowOf = Callable[[str], TreeRow | None]


def id_prefixes(ids: list[str]) -> dict[str, str]:
    """Each id cut to the shortest prefix (8 characters at least) that tells the listed ids
    apart: what a user types after ``/`` in the tree to find one."""
    ordered = sorted(ids)
    common = max((_shared(a, b) for a, b in pairwise(ordered)), default=0)
    size = max(8, common + 1)
    return {i: i if len(i) <= size else i[:size] + "…" for i in ordered}


def _shared(a: str, b: str) -> int:
    """How many leading characters ``a`` and ``b`` have in common."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def affected_text(t: Text, impact: Impact, row_of: RowOf | None) -> None:
    """The superseded decisions by name — id prefix, step key or type, chosen option — in
    the plan's order, the re-made ones marked; at most NAMED_AT_MOST, then a count."""
    remade = {r.decision_id: r for r in impact.remade}
    rows = {d: row_of(d) if row_of else None for d in impact.affected_decisions}

    def in_plan_order(decision_id: str) -> tuple[bool, int, str]:
        row = rows[decision_id]
        return (row is None, row.sequence_number if row else 0, decision_id)

    order = sorted(rows, key=in_plan_order)
    shown = order[:NAMED_AT_MOST]
    prefix = id_prefixes(shown)
    for decision_id in shown:
        row, again = rows[decision_id], remade.get(decision_id)
        if decision_id == impact.decision_id:
            name = impact.step_key or (row.decision_type if row else "")
        elif again is not None:
            name = again.step_key or (row.decision_type if row else "")
        else:
            name = row.decision_type if row else ""
        chosen = row.chosen_option if row else (again.chosen_option if again else "")
        t.append(f"  {prefix[decision_id]} ", style="dim")
        t.append(f"{name or '?'}", style="bold" if decision_id == impact.decision_id else "")
        t.append(f"  {one_line(chosen, 40)}")
        t.append("  (re-made)\n" if again else "\n", style="yellow")
    if len(order) > NAMED_AT_MOST:
        t.append(f"  … and {len(order) - NAMED_AT_MOST:,} more\n", style="dim")


def impact_text(impact: Impact, row_of: RowOf | None = None) -> Text:
    """The preview; ``row_of`` names the affected decisions from the rows the tree holds."""
    if impact.append is not None:
        return append_text(impact)
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
        "(also highlighted in the tree behind this preview)\n",
        style="bold",
    )
    affected_text(t, impact, row_of)
    if impact.remade:
        t.append("\nre-made because the resources they wrote roll back\n", style="bold")
        for remade in impact.remade:
            t.append(f"  {remade.step_key or remade.decision_id}: {remade.chosen_option} ")
            t.append(f"({', '.join(remade.resources)})\n", style="dim")
    t.append("\nchild plans\n", style="bold")
    if not impact.children:
        t.append("  -\n", style="dim")
    for child in impact.children:
        t.append(f"  {child.plan_id} {child.action} ({child.phase.value}, {child.state.value}): ")
        t.append(f"{child.outcome.value}\n", style="yellow")
    t.append("\nresources\n", style="bold")
    t.append("  rolled back        ")
    t.append(", ".join(impact.rolled_back()) or "-", style="green")
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
    _later_work(t, impact)
    if impact.warnings:
        t.append(f"\n{len(impact.warnings)} warning(s) to confirm next.\n", style="bold yellow")
    if impact.outside_changes:
        t.append("Then: keep or discard the files changed outside the plan.\n", style="bold yellow")
    return t


def _later_work(t: Text, impact: Impact) -> None:
    """Files changed outside the plan that the revert rolls back, and the guidance of
    earlier corrections the restored actor lacks (carried forward, or dropped)."""
    if impact.outside_changes:
        t.append("\nchanged outside the plan (the revert rolls these back)\n", style="bold")
        for change in impact.outside_changes:
            t.append(f"  ⚠ {change.summary(limit=50)}\n", style="yellow")
    for title, found, style in (
        ("guidance of earlier corrections carried forward", impact.guidance_carried, "green"),
        ("guidance of earlier corrections dropped (superseded)", impact.guidance_dropped, "red"),
    ):
        if found:
            t.append(f"\n{title}\n", style="bold")
            for guidance in found:
                t.append(f"  {guidance_line(guidance)}\n", style=style)


def append_text(impact: Impact) -> Text:
    """An append supersedes nothing and rolls nothing back: what the appended plan will
    make, where it works, how it lands, and the irreversible effects its work repeats."""
    appended = impact.append
    assert appended is not None
    t = Text()
    t.append(f"Append to decision {impact.decision_id}", style="bold")
    t.append(f" ({impact.decision_phase.value}) of plan {impact.plan_id}\n")
    t.append("attempt ", style="bold")
    t.append(f"{impact.attempt} → {impact.attempt + 1}\n")
    t.append("guidance ", style="bold")
    t.append(f"{impact.guidance}\n")
    t.append("\nno decision superseded, nothing rolled back: history untouched\n", style="bold")
    t.append("\nthe appended plan makes\n", style="bold")
    if not appended.predicted:
        t.append(
            "  what its actor decides under the guidance (no decision point of the action is "
            "this decision's: the scripted reasoner makes none)\n",
            style="dim",
        )
    for n, step in enumerate(appended.steps, 1):
        t.append(f"  {n}. {step.key} ({step.phase.value}): {step.chosen_option}")
        work = [*step.tool_calls, *(f"spawns {s}" for s in step.spawns)]
        t.append(f" — {', '.join(work)}\n" if work else "\n", style="dim")
    t.append("\nworks in\n", style="bold")
    if appended.sandbox_host is not None:
        t.append(
            f"  the sandboxes of plan {appended.sandbox_host}, on top of what they hold now; "
            "it lands once, with that plan's Apply\n"
        )
    else:
        t.append(
            "  sandboxes of its own, made from the real resources (the plan is applied); "
            "it lands on its own Apply, on its own branch\n"
        )
    t.append(f"  {', '.join(appended.resources) or '-'}\n", style="dim")
    t.append("\nirreversible effects it repeats\n", style="bold")
    if not impact.irreversible:
        t.append("  -\n", style="dim")
    for effect in impact.irreversible:
        effects = f" — {', '.join(effect.side_effects)}" if effect.side_effects else ""
        t.append(f"  ⚠ {effect.tool} ({effect.invocations} invocation(s)){effects}\n", style="red")
    if impact.warnings:
        t.append(f"\n{len(impact.warnings)} warning(s) to confirm next.\n", style="bold yellow")
    return t


class ImpactModal(Dialog[bool]):
    """Dismisses with True to go on, with :attr:`impact` holding the alternative picked here
    (for a decision of the scripted reasoner: a pick is needed when the guidance selects
    none — engine/guidance.py)."""

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

    def __init__(self, impact: Impact, row_of: RowOf | None = None) -> None:
        super().__init__()
        self.impact = impact
        self.row_of = row_of  # the plan screen's tree rows, to name the affected decisions

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Impact preview", classes="modal-title")
            with VerticalScroll(id="impact-body"):
                yield Static(
                    safe_text(impact_text(self.impact, self.row_of)), id="impact-text", markup=False
                )
                yield from self._alternatives()
            with Horizontal():
                yield Button("Correct… (y)", id="go", variant="warning")
                yield Button("Cancel (N)", id="cancel", variant="primary")

    def _alternatives(self) -> ComposeResult:
        """The corrected decision's alternatives, the one the replay takes pressed."""
        found = self.impact.alternatives
        if found is None:
            return
        yield Label(
            f"Alternatives of step {found.key} — the replay takes the one pressed "
            "(select it, or press its number)"
        )
        with RadioSet(id="alternatives"):
            for number, option in enumerate(found.options, 1):
                yield RadioButton(f"{number}. {option}", value=number == found.selected)
        notice = self._notice("Pick the one to take.") if found.selected is None else ""
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
