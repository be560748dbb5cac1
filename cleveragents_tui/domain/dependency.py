"""Influence edges: which later decision or child plan depended on which decision."""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, ConfigDict, model_validator

from cleveragents_tui.domain.enums import DependencyType
from cleveragents_tui.domain.ids import Ulid


class DecisionDependency(BaseModel):
    """``downstream_ref`` is a decision id (type ``decision``) or a plan id (type ``plan``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    upstream_decision_id: Ulid
    downstream_ref: Ulid
    dependency_type: DependencyType

    @model_validator(mode="after")
    def _check_rules(self) -> Self:
        if self.upstream_decision_id == self.downstream_ref:
            raise ValueError("a decision cannot depend on itself")
        return self
