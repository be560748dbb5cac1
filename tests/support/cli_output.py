"""Reading what the CLI printed, as a script would."""

from __future__ import annotations

import re

_PLAN_ID = re.compile(r"\bplan ([0-9A-HJKMNP-TV-Z]{26})\b")


def heading_plan_id(output: str) -> str:
    """The plan id in the plan heading that `plan use` / `plan run` print first
    (``action · phase · state · … · plan ID``)."""
    found = _PLAN_ID.search(output.splitlines()[0])
    assert found, f"no plan id in the heading: {output.splitlines()[0]!r}"
    return found.group(1)
