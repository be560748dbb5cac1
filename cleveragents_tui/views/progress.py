"""One line for each thing a running plan or correction did: the app's replay log and the
CLI's progress lines (cli/progress.py) word them alike. Plain text; the caller escapes it
for the terminal (``domain.display.printable``)."""

from __future__ import annotations

from cleveragents_tui.domain.display import shorten
from cleveragents_tui.domain.wording import counted
from cleveragents_tui.engine.read.run_progress import Happened
from cleveragents_tui.engine.read.tui_queries import EventView

LINE_LIMIT = 160  # an event's payload can hold a long reason or many resources

# Logged for each decision the replay re-makes: the CLI's decision line says it already.
_SAID_BY_THE_DECISION = frozenset({"decision_remade"})
# Every write of a tool: too many to follow; the plan's diff shows them.
_NOT_SHOWN = frozenset({"resource_written", *_SAID_BY_THE_DECISION})


def event_line(event: EventView) -> str:
    """One line for an event of a running plan or correction."""
    payload = event.payload
    if event.kind == "resources_rolled_back":
        resources = payload.get("resources")
        return "rolled back: " + "; ".join(
            map(str, resources if isinstance(resources, list) else [])
        )
    if event.kind == "decisions_superseded":
        count = payload.get("count")
        superseded = counted(count if isinstance(count, int) else 0, "decision")
        return f"{superseded} superseded; reasoning restored to before it"
    if event.kind in ("outside_changes_kept", "outside_changes_discarded"):
        changes = payload.get("changes")
        listed = "; ".join(map(str, changes if isinstance(changes, list) else []))
        return f"{event.kind.split('_')[-1]} the files changed outside the plan: {listed}"
    if event.kind == "decision_remade":
        return f"re-made {payload.get('key')}: {payload.get('chosen')}"
    if event.kind == "plan_created":
        profile = payload.get("profile")
        return f"plan {event.plan_id} created from {payload.get('action')} (profile {profile})"
    if event.kind in ("correction_started", "correction_finished"):
        how = payload.get("mode") if event.kind == "correction_started" else payload.get("status")
        return f"correction {payload.get('correction_id')} {event.kind.split('_')[1]} ({how})"
    if event.kind == "apply_started":
        return f"Apply started (attempt {payload.get('attempt')})"
    if event.kind == "plan_applied":
        results = payload.get("results")
        return f"applied: {counted(len(results) if isinstance(results, list) else 0, 'resource')}"
    if event.kind == "approval_answered":
        return f"approval {payload.get('approval_id')}: {payload.get('answer')} by {event.actor}"
    if event.kind == "apply_failed":
        return f"Apply {payload.get('state')}: {payload.get('reason')}"
    if event.kind == "plan_errored":
        return f"errored: {payload.get('reason')}"
    if event.kind == "plan_state":
        return f"now {payload.get('phase')} · {payload.get('state')}"
    if event.kind == "child_spawned":
        return f"child plan {payload.get('child')} started ({payload.get('action')})"
    if event.kind == "model_usage":
        cost = payload.get("cost_usd")
        priced = f", ${cost:.4f}" if payload.get("priced") and isinstance(cost, float) else ""
        return f"model {payload.get('model')}: {payload.get('tokens')} tokens{priced}"
    detail = ", ".join(f"{k}={v}" for k, v in payload.items())
    return event.kind + (f" ({detail})" if detail else "")


class ProgressLines:
    """The CLI's line for each decision or event of a run; None for what it does not show.

    The plan the command ran needs no naming; a child plan's lines start with its action's
    name (``[write-docs]``, then ``[write-docs 2]`` for a second child of that action), which
    the ``child plan ID started (ACTION)`` line ties to its id. Each line is cut to ``width``.
    """

    def __init__(self, root_plan_id: str | None, width: int = LINE_LIMIT) -> None:
        self.root_plan_id = root_plan_id
        self.width = width
        self._labels: dict[str, str] = {}

    def line(self, happened: Happened) -> str | None:
        event = happened.event
        if happened.plan_id == self.root_plan_id:
            whose = ""
        elif event is not None and event.kind == "plan_created":  # said by "child … started"
            return None
        else:
            whose = f"[{self._label(happened.plan_id, happened.action)}] "
        row = happened.decision
        if row is not None:
            remade = " (re-made)" if row.is_correction else ""
            text = f"#{row.sequence_number} {row.phase} {row.decision_type}: {row.chosen_option}"
            return shorten(f"  {whose}{text}{remade}", self.width)
        if event is None or event.kind in _NOT_SHOWN:
            return None
        return shorten(f"  {whose}· {event_line(event)}", self.width)

    def _label(self, plan_id: str, action: str) -> str:
        if plan_id not in self._labels:
            name = action.rsplit("/", 1)[-1]
            taken = set(self._labels.values())
            label, n = name, 1
            while label in taken:
                n += 1
                label = f"{name} {n}"
            self._labels[plan_id] = label
        return self._labels[plan_id]
