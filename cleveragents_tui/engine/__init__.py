"""Use cases: the one API every interface calls (CLI, TUI, web, tests).

The subpackages are layered (docs/architecture.md, "Engine"): ``ops``, ``read``, ``setup``
and ``demo`` above ``correct``, above ``run``, above ``core``. The names below are the public
API, loaded on first use so that importing one light module (``run.run_options``) does not load
the runner (docs/benchmarks.md, "serve"). This module is also the composition root: it hands
the runner the correction engine's revert (run/reversion.py), so ``run`` never imports
``correct``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from cleveragents_tui.engine.run import reversion as _reversion

if TYPE_CHECKING:
    from cleveragents_tui.engine.core.reconcile import OutsideChoice
    from cleveragents_tui.engine.correct.execute import execute
    from cleveragents_tui.engine.correct.model import CorrectionResult, Impact
    from cleveragents_tui.engine.correct.preview import preview
    from cleveragents_tui.engine.ops.cleanup import discard_plan
    from cleveragents_tui.engine.read.browse import (
        explain_decision,
        list_plans,
        plan_tree,
        show_plan,
    )
    from cleveragents_tui.engine.run.approvals import answer_approval, pending_approvals
    from cleveragents_tui.engine.run.lifecycle import (
        apply_plan,
        cancel_plan,
        pause_plan,
        pause_run,
        resume_plan,
    )
    from cleveragents_tui.engine.run.run_options import RunOptions
    from cleveragents_tui.engine.run.runner import start_plan

__all__ = [
    "CorrectionResult",
    "Impact",
    "OutsideChoice",
    "RunOptions",
    "answer_approval",
    "apply_plan",
    "cancel_plan",
    "discard_plan",
    "execute",
    "explain_decision",
    "list_plans",
    "pause_plan",
    "pause_run",
    "pending_approvals",
    "plan_tree",
    "preview",
    "resume_plan",
    "show_plan",
    "start_plan",
]

_HOMES = {
    "OutsideChoice": "core.reconcile",
    "execute": "correct.execute",
    "CorrectionResult": "correct.model",
    "Impact": "correct.model",
    "preview": "correct.preview",
    "discard_plan": "ops.cleanup",
    "explain_decision": "read.browse",
    "list_plans": "read.browse",
    "plan_tree": "read.browse",
    "show_plan": "read.browse",
    "answer_approval": "run.approvals",
    "pending_approvals": "run.approvals",
    "apply_plan": "run.lifecycle",
    "cancel_plan": "run.lifecycle",
    "pause_plan": "run.lifecycle",
    "pause_run": "run.lifecycle",
    "resume_plan": "run.lifecycle",
    "RunOptions": "run.run_options",
    "start_plan": "run.runner",
}


def __getattr__(name: str) -> Any:
    """A public name, imported from its module the first time it is asked for."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{home}"), name)


def _reverter() -> _reversion.Reverter:
    from cleveragents_tui.engine.correct.execute import revert_running_plan

    return revert_running_plan


_reversion.provide(_reverter)
