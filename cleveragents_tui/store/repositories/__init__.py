"""Repositories: the only code that reads and writes rows. One per aggregate, a module each.

The unit of work binds them to its session (``uow.plans``, ``uow.decisions``, ...).
"""

from cleveragents_tui.store.repositories.approvals import ApprovalRepository
from cleveragents_tui.store.repositories.checkpoints import CheckpointRepository
from cleveragents_tui.store.repositories.corrections import CorrectionRepository
from cleveragents_tui.store.repositories.decisions import ContextBlobRepository, DecisionRepository
from cleveragents_tui.store.repositories.plans import PlanActionRepository, PlanRepository
from cleveragents_tui.store.repositories.records import (
    EventRepository,
    SettingRepository,
    ToolInvocationRepository,
)
from cleveragents_tui.store.repositories.resources import ResourceRepository

__all__ = [
    "ApprovalRepository",
    "CheckpointRepository",
    "ContextBlobRepository",
    "CorrectionRepository",
    "DecisionRepository",
    "EventRepository",
    "PlanActionRepository",
    "PlanRepository",
    "ResourceRepository",
    "SettingRepository",
    "ToolInvocationRepository",
]
