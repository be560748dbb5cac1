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
    refused = _event(ROOT, "model_usage", model="m:x", tokens=9, refused="record_decision.x y")
    assert (
        lines.line(refused) == "  · model m:x: 9 tokens; refused, asked again: record_decision.x y"
    )
    assert lines.line(_event(ROOT, "plan_state", phase="execute")) == "  · now execute · None"
    assert lines.line(_event(ROOT, "limit_exceeded", limit="tool_calls", value=51)) == (
        "  · limit tool_calls exceeded: None of None (None)"
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


# Each kind of event the engine logs, with the payload it logs: the line a person reads in
# the progress lines and the app's `last:` row. They were the kind's name and its first
# fields (`plan_paused_on_denial (approval_id 01M…; by root; question l…`).
WORDED: dict[str, tuple[dict[str, object], str]] = {
    "plan_paused_on_denial": (
        {"approval_id": "01A", "question": "Apply?", "reason": "not yet", "by": "maria"},
        "paused: maria denied its question: not yet",
    ),
    "denied_decision_guided": (
        {"key": "approach", "text": "use a class"},
        "decision approach to be made again: use a class",
    ),
    "limit_exceeded": (
        {"limit": "limits.max_tool_invocations", "allowed": 1, "used": 2, "action": "pause"},
        "limit limits.max_tool_invocations exceeded: 2 of 1 (pause)",
    ),
    "profile_changed": (
        {"from": "auto", "to": "supervised"},
        "profile changed from auto to supervised",
    ),
    "model_changed": (
        {"from": {"model": "openai:a"}, "to": {"model": "openai:b", "base_url": "http://h:1/v1"}},
        "model changed to openai:b at http://h:1/v1",
    ),
    "apply_retried": ({"from": "errored"}, "Apply retried (from errored)"),
    "constrained_apply_reverted": (
        {"decision": "01D", "reason": "docs refused"},
        "Apply refused: docs refused; reverted to decision 01D",
    ),
    "restored_before_retry": (
        {"decision": "01D", "resource": "local/shop", "checkpoint": "01C", "report": {}},
        "local/shop restored before decision 01D retries",
    ),
    "sandbox_changed_outside": (
        {"changes": ["local/shop: a.py"], "count": 1},
        "files changed in the sandbox outside the plan: 1",
    ),
    "checkpoints_collected": (
        {"count": 3},
        "3 checkpoints of superseded attempts removed (agents gc)",
    ),
    "demo_data_loaded": ({"plan_id": "01P"}, "sample plan loaded"),
    "plan_discarded": (
        {"plans": ["01P"], "sandboxes": 1, "branches": [], "bytes": 10},
        "discarded: 1 sandbox removed",
    ),
}


def test_each_kind_of_event_reads_as_words() -> None:
    for kind, (payload, said) in WORDED.items():
        assert event_line(EventView(1, ROOT, kind, None, payload, AT)) == said, kind
    no_reason: dict[str, object] = {
        "approval_id": "01A",
        "question": "Apply?",
        "reason": None,
        "by": "li",
    }
    paused = EventView(1, ROOT, "plan_paused_on_denial", None, no_reason, AT)
    assert event_line(paused) == "paused: li denied its question"  # the app's reason is optional


def test_every_kind_the_engine_logs_has_its_words() -> None:
    """A kind added to the engine without a line of its own would show as its name and raw
    fields: each kind in the package's ``events.append`` calls reads otherwise."""
    logged = _logged_kinds()
    assert {"plan_state", "limit_exceeded", "plan_paused_on_denial"} <= logged  # found them
    for kind in logged - {"resource_written"}:  # not shown: too many
        line = event_line(EventView(1, ROOT, kind, None, {}, AT))
        assert not line.startswith(kind), kind


def _logged_kinds() -> set[str]:
    """The kind of every plan's event the package logs: the first argument of each
    ``….events.append(…, plan_id=…)`` (a literal, or a module's constant), and what
    ``record_progress`` is given."""
    import ast
    from pathlib import Path

    import cleveragents_tui

    kinds: set[str] = set()
    for path in Path(cleveragents_tui.__file__).parent.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        constants = {
            target.id: node.value.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
            for target in node.targets
            if isinstance(target, ast.Name) and isinstance(node.value.value, str)
        }
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            called = ast.unparse(node.func)
            first = (
                node.args[2] if called == "record_progress" and len(node.args) > 2 else node.args[0]
            )
            of_a_plan = any(k.arg == "plan_id" for k in node.keywords)  # not a setting's
            if not (
                (called.endswith("events.append") and of_a_plan) or called == "record_progress"
            ):
                continue
            if isinstance(first, ast.JoinedStr):
                continue  # `plan_{what}`: its kinds are logged by name elsewhere too
            for each in ast.walk(first):  # a conditional's both sides too
                if isinstance(each, ast.Constant) and isinstance(each.value, str):
                    kinds.add(each.value)
                elif isinstance(each, ast.Name) and each.id in constants:
                    kinds.add(constants[each.id])
    return kinds
