"""What screens need from the app, typed (the app module imports the screens, not back)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, cast

from textual.dom import DOMNode
from textual.worker import Worker

from cleveragents_tui.engine import RunOptions
from cleveragents_tui.store.store import Store


@dataclass(frozen=True)
class EngineRun:
    """Engine work a screen started in a thread: a correction's replay, a plan run."""

    worker: Worker[Any]
    what: str  # as the quit question names it: "a correction's replay"
    plan_id: str
    pause: bool  # False for an Apply: it lands to the end (its journal guards a crash only)


class AppServices(Protocol):
    store: Store
    user: str
    run_options: RunOptions | None

    def open_plan(self, plan_id: str) -> None: ...

    def open_diff(self, correction_id: str) -> None: ...

    def leave_plan(self) -> None: ...

    def compact_heap(self) -> None: ...

    def thaw_heap(self) -> None: ...

    def engine_started(
        self, worker: Worker[Any], what: str, plan_id: str, *, pause: bool = True
    ) -> None: ...

    def engine_run_on(self, plan_id: str) -> EngineRun | None: ...


def services(node: DOMNode) -> AppServices:
    return cast(AppServices, node.app)
