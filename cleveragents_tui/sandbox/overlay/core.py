"""The state every layer of the overlay sandbox shares: its layers, looked up and stored.

:class:`OverlayCore` holds the layer stack and the merged view, finds a path from the top
layer down to the real directory, and appends records to the top layer's log. The file
operations (:mod:`.files`), the checkpoints (:mod:`.checkpoints`) and the Sandbox protocol
(:mod:`.sandbox`) build on it, in that order.
"""

from __future__ import annotations

import errno
import json
import stat
from pathlib import Path
from typing import BinaryIO

from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.base import CheckpointMissingError
from cleveragents_tui.sandbox.directory_sandbox import DirectorySandbox
from cleveragents_tui.sandbox.home import META, Identity
from cleveragents_tui.sandbox.objectstore.files import read_json_object, write_json
from cleveragents_tui.sandbox.objectstore.names import (
    check_entry_path,
    check_oid,
    join_path,
    new_ref,
)
from cleveragents_tui.sandbox.objectstore.tree_writer import (
    list_path,
    lstat_path,
    read_path,
    readlink_path,
)
from cleveragents_tui.sandbox.objectstore.trees import DIRECTORY, FILE, SYMLINK
from cleveragents_tui.sandbox.overlay.layers import (
    SPECIAL,
    WHITEOUT,
    Layer,
    Node,
    log_line,
    parse_record,
    put_node,
)
from cleveragents_tui.sandbox.safety import UnsafeInputError


class OverlayCore(DirectorySandbox):
    """The layer stack and its merged view: a path looked up, a record appended."""

    def __init__(
        self, resource: Resource, identity: Identity, home: Path, real: Path, *, durable: bool
    ) -> None:
        super().__init__(resource, identity, home, real, durable=durable)
        self._layers_dir = home / "layers"
        self._kept_dir = home / "kept"
        self._base_file = home / "base.json"
        self._layers: list[Layer] = []
        self._view: dict[str, Node] = {}
        # checkpoints rolled back past: reference -> the merged view at it (read when asked)
        self._kept: dict[str, dict[str, Node] | None] = {}
        self._log: BinaryIO | None = None

    # --- looking paths up ------------------------------------------------------------------

    def _find(self, path: str) -> Node | None:
        return self._resolve(self._view, check_entry_path(path))

    def _existing(self, path: str) -> Node:
        self._alive()
        node = self._find(path)
        if node is None:
            raise FileNotFoundError(errno.ENOENT, "no such file or directory in the sandbox", path)
        return node

    def _resolve(self, view: dict[str, Node], path: str) -> Node | None:
        node = view.get(path)
        if node is not None:
            return None if node.kind == WHITEOUT else node
        if self._hidden(path, view, including=False):
            return None
        return self._lower_node(path)

    def _hidden(self, path: str, view: dict[str, Node], *, including: bool) -> bool:
        """Whether the real directory's entry at ``path`` is hidden by ``view``."""
        parts = path.split("/") if path else []
        for depth in range(1, len(parts) + (1 if including else 0)):
            node = view.get("/".join(parts[:depth]))
            if node is not None and node.hides_below():
                return True
        return False

    def _lower_node(self, path: str) -> Node | None:
        st = lstat_path(self._real, path)
        if st is None:
            return None
        mode = stat.S_IMODE(st.st_mode) & 0o777
        if stat.S_ISREG(st.st_mode):
            return Node(FILE, mode, st.st_size, "", False)
        if stat.S_ISDIR(st.st_mode):
            return Node(DIRECTORY, mode, 0, "", False)
        if stat.S_ISLNK(st.st_mode):
            return Node(SYMLINK, 0o777, st.st_size, readlink_path(self._real, path), False)
        return Node(SPECIAL, mode, st.st_size, "", False)

    def _lower_below(self, path: str) -> list[str]:
        """Every path of the real directory under ``path`` (no symlink followed)."""
        found: list[str] = []
        for name in list_path(self._real, path):
            child = join_path(path, name)
            if visible_name(child):
                found.append(child)
                found.extend(self._lower_below(child))
        return found

    def _content(self, path: str, node: Node) -> bytes:
        if node.ref:
            return self._store.read_bytes(node.ref, limit=node.size)
        return read_path(self._real, path)

    # --- storage ---------------------------------------------------------------------------

    def _put(self, path: str, node: Node) -> None:
        log = self._log
        assert log is not None
        log.write(log_line(path, node))
        log.flush()
        put_node(self._layers[-1].entries, path, node)
        put_node(self._view, path, node)

    def _put_all(self, records: list[tuple[str, Node]]) -> None:
        """:meth:`_put` of several records, written to the log in one write."""
        log = self._log
        assert log is not None
        log.write(b"".join(log_line(path, node) for path, node in records))
        log.flush()
        for path, node in records:
            put_node(self._layers[-1].entries, path, node)
            put_node(self._view, path, node)

    def _make_parents(self, path: str) -> None:
        parts = check_entry_path(path).split("/")
        for depth in range(1, len(parts)):
            parent = "/".join(parts[:depth])
            node = self._find(parent)
            if node is None:
                self._put(parent, Node(DIRECTORY, 0o755, 0, "", False))
            elif node.kind != DIRECTORY:
                raise NotADirectoryError(errno.ENOTDIR, "a parent is not a directory", parent)

    def _start_layer(self, seq: int) -> None:
        name = new_ref(seq)
        folder = self._layers_dir / name
        folder.mkdir()
        self._log = open(folder / "log", "ab")  # noqa: SIM115 - kept open between writes
        self._layers.append(Layer(name, {}))

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def _sealed_id(self, name: str) -> str:
        path = self._layers_dir / name / "sealed"
        if not path.is_file():
            raise CheckpointMissingError(f"layer {name} is gone", "roll back to another checkpoint")
        return check_oid(read_json_object(path).get("layer"))

    def _read_layer(self, oid: str) -> dict[str, Node]:
        try:
            doc = json.loads(self._store.read_bytes(oid))
        except ValueError as exc:
            raise UnsafeInputError(f"layer {oid[:12]} is not JSON", "the layer is damaged") from exc
        rows = doc.get("e") if isinstance(doc, dict) and doc.get("v") == 1 else None
        if not isinstance(rows, list):
            raise UnsafeInputError(
                f"layer {oid[:12]} has an unknown format", "the layer is damaged"
            )
        entries: dict[str, Node] = {}
        for row in rows:
            path, node = parse_record(row)
            put_node(entries, path, node, strict=True)
        return entries

    def _replay_log(self, path: Path) -> dict[str, Node]:
        """The top layer from its log; a line cut short by a crash is dropped."""
        entries: dict[str, Node] = {}
        for line in path.read_bytes().splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break
            try:
                record = json.loads(line)
            except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
                raise UnsafeInputError(
                    f"a line of the layer log {path} is not a record ({exc})",
                    "the layer is damaged: discard the sandbox",
                ) from exc
            record_path, node = parse_record(record)
            put_node(entries, record_path, node, strict=True)
        return entries

    def _save_meta(self) -> None:
        write_json(self._home / META, self._identity.meta(), durable=self._durable)


def visible_name(path: str) -> bool:
    """Whether a real-directory path is reachable through the sandbox (a safe name)."""
    try:
        check_entry_path(path)
    except UnsafeInputError:
        return False
    return True
