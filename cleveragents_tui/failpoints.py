"""Named failpoints: places where tests (and the reliability suite) inject a failure.

``AGENTS_FAILPOINTS`` holds comma-separated entries ``name[@detail][#N][=action]``:

- ``name`` is a failpoint (docs/reliability.md lists them all), or ``*`` for every one;
- ``detail`` narrows it to one resource or step, e.g. ``checkpoint.after_resource@local/db``;
- ``#N`` fires only at the Nth hit that matches the entry, so ``git.call#3`` fails the third
  git command and no other, and ``*#40=kill`` kills the process at the 40th failpoint it
  reaches, whichever that is. Matches are counted from the process start, from the moment
  a failpoint first sees a new value of the variable, or from :func:`reset` (for a process
  that sets the variable again to the same value);
- ``action`` is ``raise`` (the default: raise :class:`InjectedFault`), ``kill`` (SIGKILL
  this process, as a crash would) or ``full`` (raise ``OSError(ENOSPC)``, as a write to a
  full disk does).

Every hit is counted (:func:`hits`), so a run without faults tells how many places a loop
over ``#N`` has to try. With the variable unset a failpoint costs a counter increment and
one dictionary lookup.
"""

from __future__ import annotations

import errno
import os
import signal
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

ENV_VAR = "AGENTS_FAILPOINTS"

_LOCK = threading.Lock()
_HITS: Counter[str] = Counter()
_MATCHED: Counter[str] = Counter()  # per entry: hits that matched it (for #N)
_SEEN = [""]  # the value of the variable the counts in _MATCHED belong to


class InjectedFault(RuntimeError):
    """A failure injected on purpose at a named failpoint."""


@dataclass(frozen=True)
class _Entry:
    text: str
    name: str
    detail: str | None
    nth: int | None
    action: str

    def matches(self, name: str, detail: str | None) -> bool:
        return self.name in ("*", name) and self.detail in (None, detail)


@lru_cache(maxsize=8)
def _parse(raw: str) -> tuple[_Entry, ...]:
    entries = []
    for text in filter(None, (e.strip() for e in raw.split(","))):
        spec, _, action = text.partition("=")
        spec, _, nth = spec.partition("#")
        name, _, detail = spec.partition("@")
        if action not in ("", "raise", "kill", "full") or (nth and not nth.isdigit()):
            raise ValueError(
                f"{ENV_VAR}: cannot read {text!r} (name[@detail][#N][=raise|kill|full])"
            )
        entries.append(
            _Entry(text, name, detail or None, int(nth) if nth else None, action or "raise")
        )
    return tuple(entries)


def _environ_reader() -> Callable[[], str | None]:
    """How :func:`hit` reads the variable: from the dict under ``os.environ`` (CPython's
    ``_data``, which ``os.environ[...] = ...`` and ``del`` keep current) when there is
    one, as ``os.environ.get`` costs ~1.5 µs when the variable is unset (the KeyError it
    raises and catches) and a recorded decision passes eight failpoints (issue 22)."""
    data = getattr(os.environ, "_data", None)
    if not isinstance(data, dict):
        return lambda: os.environ.get(ENV_VAR)
    key = os.environ.encodekey(ENV_VAR)
    decode = os.environ.decodevalue

    def read() -> str | None:
        raw = data.get(key)
        return None if raw is None else str(decode(raw))

    return read


_read_environ = _environ_reader()


def hit(name: str, detail: str | None = None) -> None:
    """Fail here if an entry of ``AGENTS_FAILPOINTS`` matches ``name`` (and ``detail``)."""
    raw = _read_environ()
    with _LOCK:
        _HITS[name] += 1
        if not raw:
            return
        if raw != _SEEN[0]:
            _MATCHED.clear()
            _SEEN[0] = raw
        fire = None
        for entry in _parse(raw):
            if not entry.matches(name, detail):
                continue
            _MATCHED[entry.text] += 1
            if entry.nth is None or entry.nth == _MATCHED[entry.text]:
                fire = fire or entry
    if fire is None:
        return
    if fire.action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if fire.action == "full":
        raise OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)} (injected at {name})")
    raise InjectedFault(f"injected fault at {name}" + (f"@{detail}" if detail else ""))


def hits() -> dict[str, int]:
    """How often each failpoint was reached in this process."""
    with _LOCK:
        return dict(_HITS)


def reset() -> None:
    """Start counting ``#N`` matches and :func:`hits` again from zero."""
    with _LOCK:
        _HITS.clear()
        _MATCHED.clear()
