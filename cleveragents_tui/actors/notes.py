"""The actor's notes: one line per recorded decision, from which reasoners read the keys taken.

The runner appends :func:`decision_note` to ``ActorState.notes`` after each decision; the chat
reasoner reads the keys back with :func:`keys_in_notes`. No LangChain import here, so the
runner can use it without loading a model stack.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from cleveragents_tui.actors.base import Proposal

_NOTE = re.compile(r"^decision (?P<key>[a-z0-9][a-z0-9_-]{0,63}) \[(?P<type>[a-z_]+)\]")


def decision_note(proposal: Proposal) -> str:
    """The one-line note appended to ``ActorState.notes`` after recording ``proposal``."""
    question = " ".join(proposal.question.split())
    chosen = " ".join(proposal.chosen_option.split())
    return f"decision {proposal.key} [{proposal.decision_type.value}]: {question} -> {chosen}"


def keys_in_notes(notes: Iterable[str]) -> tuple[str, ...]:
    """The decision keys recorded in ``notes`` by :func:`decision_note`, in order, once each."""
    keys: dict[str, None] = {}
    for note in notes:
        found = _NOTE.match(note) if isinstance(note, str) else None
        if found is not None:
            keys[found.group("key")] = None
    return tuple(keys)
