"""Going back to Strategize from a running plan — phase reversion, a constrained Apply — is a
revert correction, and a correction replays the plan with this package's runner. So run/
does not import correct/: the engine package, the composition root, hands the runner
its reverter (engine/__init__.py), and the import graph has no cycle
(docs/architecture.md, "Engine")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pathlib import Path

    from cleveragents_tui.domain.plan import Plan
    from cleveragents_tui.engine.run.run_options import RunOptions
    from cleveragents_tui.store.store import Store


@dataclass(frozen=True)
class Reversion:
    """A revert of ``decision_id`` with ``guidance`` that a running plan asks for: previewed
    (in the sandboxes under ``sandbox_base``), ``previewed`` called, then carried out
    acknowledged, keeping files changed outside the plan while it ran."""

    decision_id: str
    guidance: str
    requested_by: str
    options: RunOptions
    sandbox_base: Path | None
    previewed: Callable[[], None] | None = None


class Reverter(Protocol):
    """Carries out a :class:`Reversion`; returns where the replay stopped."""

    def __call__(self, store: Store, reversion: Reversion) -> Plan: ...


_provided: list[Callable[[], Reverter]] = []


def provide(load: Callable[[], Reverter]) -> None:
    """Set how to load the reverter (the engine package does, when it is imported; it loads
    the correction engine only when a plan first goes back)."""
    _provided[:] = [load]


def reverter() -> Reverter:
    """The reverter the engine package provided (loading the correction engine the first
    time a plan goes back)."""
    if not _provided:  # pragma: no cover - the engine package always provides one
        raise RuntimeError("no reverter: import cleveragents_tui.engine, which provides it")
    return _provided[0]()
