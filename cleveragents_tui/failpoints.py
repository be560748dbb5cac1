"""Named failpoints: places where tests (and the reliability suite) inject a failure.

``AGENTS_FAILPOINTS`` holds comma-separated entries ``name[@detail][=action]``; ``action`` is
``raise`` (the default: raise :class:`InjectedFault`) or ``kill`` (SIGKILL this process, as a
crash would). ``detail`` narrows the point to one resource or step, e.g.
``checkpoint.after_resource@local/db=raise``. With the variable unset a failpoint costs one
dictionary lookup.
"""

from __future__ import annotations

import os
import signal

ENV_VAR = "AGENTS_FAILPOINTS"


class InjectedFault(RuntimeError):
    """A failure injected on purpose at a named failpoint."""


def _parse(raw: str) -> dict[tuple[str, str | None], str]:
    points: dict[tuple[str, str | None], str] = {}
    for entry in filter(None, (e.strip() for e in raw.split(","))):
        spec, _, action = entry.partition("=")
        name, _, detail = spec.partition("@")
        points[(name, detail or None)] = action or "raise"
    return points


def hit(name: str, detail: str | None = None) -> None:
    """Fail here if ``name`` (optionally narrowed to ``detail``) is switched on."""
    raw = os.environ.get(ENV_VAR)
    if not raw:
        return
    points = _parse(raw)
    action = points.get((name, detail)) or points.get((name, None))
    if action is None:
        return
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise InjectedFault(f"injected fault at {name}" + (f"@{detail}" if detail else ""))
