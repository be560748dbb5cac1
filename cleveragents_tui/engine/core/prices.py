"""The price table: what a model's tokens cost, so a plan's cost is a real figure.

Settings ``prices.PROVIDER:MODEL.input_per_mtok`` and ``.output_per_mtok`` hold US dollars
per million tokens (``agents config set prices.openai:gpt-4o-mini.input_per_mtok 0.15``),
globally or for one project (the project's entry wins). A model call is priced when it is
recorded, so changing a price later does not change what was spent.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from cleveragents_tui.actors.reasoners.usage import ModelCall
from cleveragents_tui.automation.precedence import GLOBAL_SCOPE, project_scope
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.store.unit_of_work import UnitOfWork

_KEY = re.compile(r"^prices\.(?P<model>[^\s]+)\.(?P<side>input|output)_per_mtok$")
PER = 1_000_000
EXAMPLE = "prices.openai:gpt-4o-mini.input_per_mtok"


def is_price_key(key: str) -> bool:
    return _KEY.match(key) is not None


def price_value(key: str, text: str) -> float:
    """The dollars per million tokens ``text`` says; refused unless a number >= 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise UserError(
            f"{key}: {text!r} is not a price (US dollars per million tokens)",
            f"give a number of 0 or more, e.g. agents config set {key} 0.15",
        )
    return value


@dataclass(frozen=True)
class Price:
    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0

    def of(self, call: ModelCall) -> float:
        return (
            call.input_tokens * self.input_per_mtok + call.output_tokens * self.output_per_mtok
        ) / PER


def price_of(uow: UnitOfWork, model: str, project: str | None) -> Price | None:
    """The model's price (project entries first, then global ones); None when neither side
    has an entry."""
    found: dict[str, float] = {}
    scopes = [GLOBAL_SCOPE, *([project_scope(project)] if project else [])]
    for scope in scopes:  # later scopes win
        for side in ("input", "output"):
            value = uow.settings.get(scope, f"prices.{model}.{side}_per_mtok")
            if value is not None:
                found[side] = float(str(value))
    if not found:
        return None
    return Price(found.get("input", 0.0), found.get("output", 0.0))
