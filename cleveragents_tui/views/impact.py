"""A correction's impact preview (``agents plan correct --dry-run``, the app's impact
modal): what it rolls back, supersedes and re-makes — or, for an append, what the appended
plan will do — as sections."""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from typing import TYPE_CHECKING

from cleveragents_tui.domain.wording import counted
from cleveragents_tui.views.lines import one_line
from cleveragents_tui.views.sections import Emphasis, Row, Section, View

if TYPE_CHECKING:
    from cleveragents_tui.domain.views import TreeRow
    from cleveragents_tui.engine.correct.later_guidance import LaterGuidance
    from cleveragents_tui.engine.correct.model import Impact

# affected decisions named at most; the rest are counted: a 10,000-decision revert still
# previews at once
NAMED_AT_MOST = 200

RowOf = Callable[[str], "TreeRow | None"]


def id_prefixes(ids: list[str]) -> dict[str, str]:
    """Each id cut to the shortest prefix (8 characters at least) that tells the listed ids
    apart: what a user types after ``/`` in the app's tree, or to ``agents plan explain``."""
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


def impact_view(impact: Impact, row_of: RowOf | None = None, *, alternatives: bool = True) -> View:
    """The preview. ``row_of`` names the affected decisions (the app: from the rows its tree
    holds; the CLI: from the plan's tree); ``alternatives=False`` leaves out the corrected
    step's alternatives where they are shown as a choice of their own (the app's buttons)."""
    choice = _alternatives(impact) if alternatives else []
    if impact.append is not None:
        return _append_view(impact, choice)
    head = [
        Row(
            "",
            f"Correct decision {impact.decision_id} ({impact.decision_phase.value}) "
            f"of plan {impact.plan_id}",
            "heading",
        ),
        Row("mode", impact.mode.value),
        Row("rollback tier", impact.tier.value),
        Row("attempt", f"{impact.attempt} → {impact.attempt + 1}"),
        Row("guidance", impact.guidance, "strong"),
    ]
    if impact.phase_change:
        was, now = impact.phase_change
        head.append(Row("phase", f"{was.value} → {now.value}", "warn"))
    sections = [
        Section(None, tuple(head)),
        Section(
            f"decisions superseded and re-made: {len(impact.affected_decisions)}",
            _affected(impact, row_of),
        ),
    ]
    if impact.remade:
        sections.append(
            Section(
                "re-made because the resources they wrote, tested or read roll back",
                tuple(
                    Row(
                        "",
                        f"{r.decision_id} {r.step_key or '-'}: {one_line(r.chosen_option)} "
                        f"({', '.join(r.resources)})",
                    )
                    for r in impact.remade
                ),
            )
        )
    sections += choice
    children = tuple(
        Row(
            "",
            f"{c.plan_id} {one_line(c.action)} ({c.phase.value}, {c.state.value}): "
            f"{c.outcome.value}",
            "warn",
        )
        for c in impact.children
    )
    sections += [
        Section("child plans", children or (Row("", "-", "dim"),)),
        Section(
            "resources",
            (
                Row("rolled back", ", ".join(impact.rolled_back()) or "-", "good"),
                Row("cannot roll back", ", ".join(impact.non_rollbackable) or "-", "bad"),
                Row("unaffected", ", ".join(impact.unaffected) or "-", "dim"),
            ),
        ),
        Section("irreversible effects", _irreversible(impact)),
        *_later_work(impact),
        *_to_confirm(impact),
    ]
    return tuple(sections)


def _affected(impact: Impact, row_of: RowOf | None) -> tuple[Row, ...]:
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
    named = []
    for decision_id in shown:
        row, again = rows[decision_id], remade.get(decision_id)
        if decision_id == impact.decision_id:
            name = impact.step_key or (row.decision_type if row else "")
        elif again is not None:
            name = again.step_key or (row.decision_type if row else "")
        else:
            name = row.decision_type if row else ""
        chosen = row.chosen_option if row else (again.chosen_option if again else "")
        line = f"{prefix[decision_id]} {name or '?'}  {one_line(chosen, 40)}"
        if again is not None:
            named.append(Row("", line + "  (re-made)", "warn"))
        else:
            named.append(Row("", line, "strong" if decision_id == impact.decision_id else "plain"))
    if len(order) > NAMED_AT_MOST:
        named.append(Row("", f"… and {len(order) - NAMED_AT_MOST:,} more", "dim"))
    return tuple(named)


def _alternatives(impact: Impact) -> list[Section]:
    """The corrected decision's alternatives, numbered, and which one the replay takes."""
    found = impact.alternatives
    if found is None:
        return []
    rows = [Row("", f"{n}. {one_line(option, 120)}") for n, option in enumerate(found.options, 1)]
    if found.selected is not None:
        if found.by_default:
            how = "unless --choose names another"
        else:
            how = "chosen with --choose" if found.chosen else "selected by the guidance"
        rows.append(Row("", f"the replay takes {found.selected} ({how})", "good"))
    else:
        rows.append(
            Row(
                "",
                "the guidance selects none of them: the replay would make the same choice "
                f"again ({found.fallback}); {found.how_to_pick}",
                "warn",
            )
        )
        rows += [
            Row(
                "",
                f"it selects {e.option!r} of {e.key} ({e.decision_id}): correct that decision instead",
                "warn",
            )
            for e in found.elsewhere
        ]
    return [Section(f"alternatives of step {found.key}", tuple(rows))]


def _irreversible(impact: Impact) -> tuple[Row, ...]:
    rows = tuple(
        Row(
            "",
            f"⚠ {e.tool} ({counted(e.invocations, 'invocation')})"
            + (f" — {', '.join(e.side_effects)}" if e.side_effects else ""),
            "bad",
        )
        for e in impact.irreversible
    )
    return rows or (Row("", "-", "dim"),)


def _later_work(impact: Impact) -> list[Section]:
    """Files changed outside the plan that the revert rolls back, and the guidance of
    earlier corrections the restored actor lacks (carried forward, or dropped)."""
    from cleveragents_tui.engine.correct.preview import guidance_line

    sections = []
    if impact.outside_changes:
        rows = [Row("", f"⚠ {c.summary(limit=50)}", "warn") for c in impact.outside_changes]
        rows.append(
            Row(
                "",
                "keep them (put back on top of the rolled-back state, before the replay) or "
                "discard them: you are asked next (--outside-changes=keep|discard)",
            )
        )
        sections.append(
            Section("changed outside the plan in sandboxes the revert rolls back", tuple(rows))
        )
    kinds: tuple[tuple[str, tuple[LaterGuidance, ...], Emphasis], ...] = (
        (
            "guidance of earlier corrections carried forward (they stand)",
            impact.guidance_carried,
            "good",
        ),
        (
            "guidance of earlier corrections dropped (the revert supersedes them)",
            impact.guidance_dropped,
            "bad",
        ),
    )
    for title, found, emphasis in kinds:
        if found:
            sections.append(
                Section(title, tuple(Row("", guidance_line(g), emphasis) for g in found))
            )
    return sections


def _to_confirm(impact: Impact) -> list[Section]:
    if not impact.warnings:
        return []
    return [
        Section(None, (Row("", f"{counted(len(impact.warnings), 'warning')} to confirm", "warn"),))
    ]


def _append_view(impact: Impact, choice: list[Section]) -> View:
    """An append supersedes nothing and rolls nothing back: what the appended plan will
    make, where it works, how it lands, and the irreversible effects its work repeats."""
    appended = impact.append
    assert appended is not None
    head = (
        Row(
            "",
            f"Append to decision {impact.decision_id} ({impact.decision_phase.value}) "
            f"of plan {impact.plan_id}",
            "heading",
        ),
        Row("mode", impact.mode.value),
        Row("attempt", f"{impact.attempt} → {impact.attempt + 1}"),
        Row("guidance", impact.guidance, "strong"),
        Row("", "no decision superseded, nothing rolled back: history untouched", "good"),
    )
    steps = (
        []
        if appended.predicted
        else [
            Row(
                "",
                "what its actor decides under the guidance (no decision point of the action is "
                "this decision's: the scripted reasoner makes none)",
                "dim",
            )
        ]
    )
    for n, step in enumerate(appended.steps, 1):
        work = [*step.tool_calls, *(f"spawns {s}" for s in step.spawns)]
        steps.append(
            Row(
                "",
                f"{n}. {step.key} ({step.phase.value}): {one_line(step.chosen_option, 120)}"
                + (f" — {', '.join(work)}" if work else ""),
            )
        )
    if appended.sandbox_host is not None:
        where = (
            f"the sandboxes of plan {appended.sandbox_host}, on top of what they hold now; "
            "it lands once, with that plan's Apply"
        )
    else:
        where = (
            f"sandboxes of its own, made from the real resources (plan {impact.plan_id} is "
            "applied); it lands on its own Apply, on its own branch"
        )
    return (
        Section(None, head),
        *choice,
        Section("the appended plan makes", tuple(steps)),
        Section(
            "works in",
            (Row("", where), Row("resources", ", ".join(appended.resources) or "-", "dim")),
        ),
        Section("irreversible effects it repeats", _irreversible(impact)),
        *_to_confirm(impact),
    )
