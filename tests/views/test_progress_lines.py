"""The CLI's progress lines: a child plan named by its action, a second child of the same
action told apart, the plan's own creation said once, each line cut to the width given."""

from __future__ import annotations

from datetime import UTC, datetime

from cleveragents_tui.domain.views import TreeRow
from cleveragents_tui.engine.read.run_progress import Happened
from cleveragents_tui.engine.read.tui_queries import EventView
from cleveragents_tui.views.progress import ProgressLines, event_line

AT = datetime(2026, 12, 4, tzinfo=UTC)
ROOT, FIRST, SECOND = "01ROOT", "01CHILDONE", "01CHILDTWO"


ACTIONS = {ROOT: "team/add", FIRST: "team/write-docs", SECOND: "team/write-docs"}


def _event(plan_id: str, kind: str, **payload: object) -> Happened:
    event = EventView(1, plan_id, kind, None, payload, AT)
    return Happened(AT, plan_id, ACTIONS[plan_id], event=event)


def _decision(plan_id: str, chosen: str) -> Happened:
    row = TreeRow("01D", None, 0, "strategy_choice", "strategize", chosen, 0.9, False, None, None)
    return Happened(AT, plan_id, ACTIONS[plan_id], decision=row)


def test_children_of_one_action_are_told_apart_and_lines_fit_the_width() -> None:
    lines = ProgressLines(ROOT, width=60)
    assert lines.line(_event(ROOT, "plan_created", action="team/add", profile="auto")) == (
        f"  · plan {ROOT} created from team/add (profile auto)"
    )
    for child in (FIRST, SECOND):  # said by the parent's "child plan … started" line
        assert lines.line(_event(child, "plan_created", action="team/write-docs")) is None
    assert lines.line(_decision(FIRST, "a section")) == (
        "  [write-docs] #0 strategize strategy_choice: a section"
    )
    assert lines.line(_decision(SECOND, "a page")) == (
        "  [write-docs 2] #0 strategize strategy_choice: a page"
    )
    long = lines.line(_decision(ROOT, "x" * 200))
    assert long is not None and len(long) == 61 and long.endswith("…")
    assert lines.line(_event(ROOT, "resource_written", resource="r")) is None  # too many


def test_an_events_line_names_its_fields_and_survives_a_missing_one() -> None:
    lines = ProgressLines(ROOT)
    usage = _event(
        ROOT, "model_usage", model="openai:gpt-4o", tokens=900, cost_usd=0.0021, priced=True
    )
    assert lines.line(usage) == "  · model openai:gpt-4o: 900 tokens, $0.0021"
    assert lines.line(_event(ROOT, "plan_state", phase="execute")) == "  · now execute · None"
    assert lines.line(_event(ROOT, "limit_exceeded", limit="tool_calls", value=51)) == (
        "  · limit_exceeded (limit tool_calls; value 51)"
    )
    listed = _event(ROOT, "outside_thing", paths=["a.py", "b.py"], factors={"risk": 0.4}, x=1, y=2)
    assert lines.line(listed) == "  · outside_thing (paths a.py, b.py; factors risk 0.4; x 1)"
    assert lines.line(_event(ROOT, "plan_paused", **{"from": "running"})) == "  · paused"
    stopped = _event(ROOT, "plan_paused", reason="stopped by Ctrl+C", **{"from": "running"})
    assert lines.line(stopped) == "  · paused: stopped by Ctrl+C"
    with_parent = _event(ROOT, "plan_resumed", **{"from": "paused", "with": "01PARENT"})
    assert lines.line(with_parent) == "  · resumed: with plan 01PARENT"


def test_the_apps_status_line_says_who_once() -> None:
    """``by=True`` (the app's status line) ends a line with who caused the event, but an
    answer's line, which names who answered, says it once."""
    started = EventView(
        1, ROOT, "correction_started", "carol", {"correction_id": "01C", "mode": "append"}, AT
    )
    assert event_line(started, by=True) == "correction 01C started (append) by carol"
    assert event_line(started) == "correction 01C started (append)"
    answered = EventView(
        2, ROOT, "approval_answered", "bob", {"approval_id": "01A", "answer": "approved"}, AT
    )
    assert event_line(answered, by=True) == "approval 01A: approved by bob"
