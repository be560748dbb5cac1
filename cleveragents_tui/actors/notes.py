"""The actor's notes: one line per recorded decision, from which reasoners read the keys taken,
and what each of its Execute calls returned.

The runner appends :func:`decision_note` to ``ActorState.notes`` after each decision, then a
:func:`result_note` per tool call it made (a model reads what it read, ran and wrote, as an
agent's tool messages; a correction rewinds them with the rest of the state); the chat
reasoner reads the keys back with :func:`keys_in_notes`. No LangChain import here, so the
runner can use it without loading a model stack.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cleveragents_tui.actors.base import Proposal

RESULT = "result of "  # how a result note begins
RESULT_KEPT = 2000  # characters of a call's output a note keeps: its start and its end
RESULTS_WHOLE = 12  # the last call results kept whole; older ones by their first line
ARGUMENTS_KEPT = 300  # characters of a call's arguments a note keeps

_NOTE = re.compile(r"^decision (?P<key>[a-z0-9][a-z0-9_-]{0,63}) \[(?P<type>[a-z_]+)\]")


def decision_note(proposal: Proposal) -> str:
    """The one-line note appended to ``ActorState.notes`` after recording ``proposal``."""
    question = " ".join(proposal.question.split())
    chosen = " ".join(proposal.chosen_option.split())
    return f"decision {proposal.key} [{proposal.decision_type.value}]: {question} -> {chosen}"


def fenced(output: str) -> str:
    """``output`` between ``<output>`` tags, as data: a closing tag inside it is broken, so
    a tool's output cannot end the fence and pass for instructions."""
    return "<output>\n" + output.replace("</output>", "</ output>") + "\n</output>"


def result_note(
    key: str, number: int, tool: str, arguments: Mapping[str, Any], ok: bool | None, output: str
) -> str:
    """What call ``number`` (from 1) of decision ``key`` returned, its output fenced as data
    and cut in the middle past :data:`RESULT_KEPT` characters (a file's start, a test run's
    end)."""
    said = json.dumps(dict(arguments), separators=(",", ":"), ensure_ascii=False, default=str)
    if len(said) > ARGUMENTS_KEPT:
        said = said[:ARGUMENTS_KEPT] + "…"
    how = "ok" if ok else "failed"
    text = output.strip("\n")
    if len(text) > RESULT_KEPT:
        head = RESULT_KEPT * 3 // 5
        text = f"{text[:head]}\n[… {len(text) - RESULT_KEPT} characters …]\n{text[-(RESULT_KEPT - head) :]}"
    return f"{RESULT}{key} call {number}: {tool} {said}: {how}\n{fenced(text)}"


def with_notes(notes: Sequence[str], *added: str) -> list[str]:
    """``notes`` with ``added``, the call results but the last :data:`RESULTS_WHOLE` cut to
    their first line (the call and how it went): the state, every decision's context and
    the model's prompt stay bounded however long the plan runs."""
    kept = [*notes, *added]
    results = [i for i, note in enumerate(kept) if note.startswith(RESULT) and "\n" in note]
    for i in results[:-RESULTS_WHOLE]:
        kept[i] = kept[i].split("\n", 1)[0] + " (output no longer kept)"
    return kept


def keys_in_notes(notes: Iterable[str]) -> tuple[str, ...]:
    """The decision keys recorded in ``notes`` by :func:`decision_note`, in order, once each."""
    keys: dict[str, None] = {}
    for note in notes:
        found = _NOTE.match(note) if isinstance(note, str) else None
        if found is not None:
            keys[found.group("key")] = None
    return tuple(keys)
