"""How a plan runs (tools, sandbox folder, reasoner, who acts): its own module so the app can
hold one without importing the runner, which loads the whole engine (docs/benchmarks.md,
"serve" first paint)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from cleveragents_tui.actors.tools import ToolRegistry
    from cleveragents_tui.engine.core.reasoner_choice import ModelChoice, ReasonerFactory


@dataclass
class RunOptions:
    registry: ToolRegistry | None = None
    sandbox_base: Path | None = None
    reasoner_factory: ReasonerFactory | None = None
    user: str = "agents"
    model: ModelChoice | None = None  # a new plan's chat model, kept with it (else scripted)
    # Told each plan a runner starts on, before it records anything, child plans' included
    # (the CLI's progress lines follow them: cli/progress.py).
    on_start: Callable[[str], None] | None = None
