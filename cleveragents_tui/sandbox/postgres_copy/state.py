"""A PostgreSQL copy sandbox's state file: its databases' prefix, checkpoints, schema log.

``postgres_copy.json`` names no URL, so it holds no credentials; a process finds the
sandbox's databases on the server by the prefix recorded here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from cleveragents_tui.sandbox.copy_sandbox import CopyState
from cleveragents_tui.sandbox.safety import check_savepoint_name

STATE_FILE_NAME: Final = "postgres_copy.json"
LOCK_FILE_NAME: Final = "postgres_copy.flock"
_PREFIX = re.compile(r"^[0-9a-f]{12}$")


@dataclass(kw_only=True)
class State(CopyState):
    STRATEGY = "postgres_copy"

    prefix: str
    replacing: bool = False  # a rollback is replacing ``work``: the next operation settles it
    # The schema statements run in ``work``, in order (Apply runs them again), and how many
    # of them each checkpoint had seen (a rollback cuts the list back to that).
    schema_log: list[str] = field(default_factory=list)
    schema_at: dict[str, int] = field(default_factory=dict)

    def forget(self, ref: str) -> None:
        super().forget(ref)
        self.schema_at.pop(ref, None)

    @classmethod
    def _parse_more(cls, data: dict[str, Any]) -> dict[str, Any]:
        prefix = str(data["prefix"])
        if not _PREFIX.match(prefix):
            raise ValueError(f"bad prefix {prefix!r}")
        return {
            "prefix": prefix,
            "replacing": bool(data.get("replacing", False)),
            "schema_log": [str(statement) for statement in data.get("schema_log", [])],
            "schema_at": {
                check_savepoint_name(str(ref)): int(count)
                for ref, count in data.get("schema_at", {}).items()
            },
        }


def is_copy_sandbox(root: Path) -> bool:
    """Whether ``root`` holds a :class:`PostgresCopySandbox` (its state file)."""
    return (root / STATE_FILE_NAME).is_file()
