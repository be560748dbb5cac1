"""The overlay sandbox's layers: what each path became, and how layers merge and are stored.

A layer maps paths to :class:`Node` (a file, a directory, a symlink or a whiteout);
:func:`fold` merges layers bottom first. On disk a layer is JSON records (:func:`record`):
appended one per line to the top layer's log, or written whole when it is sealed.
Everything read back is checked (:func:`parse_record`), since a damaged or planted layer
may hold anything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import NamedTuple

from cleveragents_tui.sandbox.objectstore.files import json_int
from cleveragents_tui.sandbox.objectstore.names import (
    check_entry_path,
    check_link_target,
    check_oid,
)
from cleveragents_tui.sandbox.objectstore.trees import DIRECTORY, FILE, SYMLINK
from cleveragents_tui.sandbox.safety import UnsafeInputError

WHITEOUT = "w"
SPECIAL = "x"
LAYER_KINDS = frozenset({FILE, DIRECTORY, SYMLINK, WHITEOUT})


class Node(NamedTuple):
    """What a layer (or the real directory) has at a path.

    ``ref`` is the object id of a file written through the sandbox ("" for a file of the
    real directory) or a symlink's target. ``opaque`` marks a directory that replaced
    something, so nothing below it in lower layers shows through.
    """

    kind: str
    mode: int
    size: int
    ref: str
    opaque: bool

    def hides_below(self) -> bool:
        return self.kind != DIRECTORY or self.opaque


GONE = Node(WHITEOUT, 0, 0, "", False)


def put_node(entries: dict[str, Node], path: str, node: Node, *, strict: bool = False) -> None:
    """Record ``node`` at ``path`` over what ``entries`` holds (a layer, or a merged view).

    A whiteout, file, link or opaque directory hides everything below it, so entries under
    the path go. A plain directory over something that was not a plain directory becomes
    opaque: what it replaced hid the lower layers, and so must it. ``strict`` (records
    read from disk) refuses a path below a non-directory of the same layer.
    """
    old = entries.get(path)
    if node.kind == DIRECTORY and not node.opaque and old is not None and old.hides_below():
        node = node._replace(opaque=True)
    if strict:
        parts = path.split("/")
        for depth in range(1, len(parts)):
            above = entries.get("/".join(parts[:depth]))
            if above is not None and above.kind != DIRECTORY:
                raise UnsafeInputError(f"layer has {path!r} below a non-directory", "damaged layer")
    if node.hides_below():
        prefix = path + "/"
        for below in [p for p in entries if p.startswith(prefix)]:
            del entries[below]
    entries[path] = node


def fold(layers: list[dict[str, Node]]) -> dict[str, Node]:
    """The merged view of ``layers`` (bottom first); parents go before children.

    Strict: a layer cannot put anything below what a lower layer made a non-directory
    (the file operations never do; a damaged or planted layer would).
    """
    view: dict[str, Node] = {}
    for entries in layers:
        for path in sorted(entries):
            put_node(view, path, entries[path], strict=True)
    return view


def record(path: str, node: Node) -> list[object]:
    return [node.kind, path, node.mode, node.size, node.ref, node.opaque]


def parse_record(row: object) -> tuple[str, Node]:
    if not isinstance(row, list) or len(row) != 6:
        raise UnsafeInputError(f"layer record {row!r} is malformed", "the layer is damaged")
    kind, path, mode, size, ref, opaque = row
    if kind not in LAYER_KINDS or not isinstance(path, str) or not isinstance(opaque, bool):
        raise UnsafeInputError(f"layer record {row!r} is not allowed", "the layer is damaged")
    check_entry_path(path)
    mode, size = json_int(mode, "mode"), json_int(size, "size")
    if not 0 <= mode <= 0o777 or size < 0:
        raise UnsafeInputError(f"{path!r} has mode {mode:o} or size {size}", "the layer is damaged")
    if kind == FILE:
        check_oid(ref)
    elif kind == SYMLINK:
        check_link_target(path, ref)
    elif ref != "":
        raise UnsafeInputError(f"{path!r} has an unexpected reference", "the layer is damaged")
    return path, Node(kind, mode, size, str(ref), opaque)


@dataclass
class Layer:
    name: str
    entries: dict[str, Node]
    sealed: str | None = None


def encode_layer(entries: dict[str, Node]) -> bytes:
    rows = [record(path, entries[path]) for path in sorted(entries)]
    return json.dumps({"v": 1, "e": rows}, separators=(",", ":")).encode()


def log_line(path: str, node: Node) -> bytes:
    return json.dumps(record(path, node), separators=(",", ":")).encode() + b"\n"
