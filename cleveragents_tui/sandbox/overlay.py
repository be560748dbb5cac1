# Over 500 lines: OverlaySandbox is one ~660-line layer stack; its layer format is overlay_layers.
"""The overlay sandbox: copy-on-write layers in user space over the real directory.

No mount: the real directory is the read-only *lower* layer, and tools go through this
sandbox's file operations (:meth:`OverlaySandbox.read_bytes`, ``write_bytes``, ``delete``,
``list_dir``, ...), so ``workdir`` is None. Each layer records, per path, what it became: a
file (its content is an object in the shared :class:`ObjectStore`), a directory (*opaque*
when it replaced something, hiding what is below), a symlink, or a *whiteout* (deleted).
A path is looked up from the top layer down and falls through to the real directory.
A rename is recorded as what it leaves: the entries at their new paths and a whiteout at
the old one (:meth:`OverlaySandbox.move`); a mode as the entry's mode (``chmod``), an empty
folder as a directory entry (``make_dirs``), a link as a symlink entry (``symlink``).

Layout of the ``root`` folder given to ``create`` (the sandbox owns it)::

    sandbox.json            plan, strategy, resource, real location
    base.json               lstat of every real path when the sandbox was made (or applied)
    objects/                file contents written through the sandbox
    layers/NNNNNN-xxxxxxxx/ one layer; the name is its checkpoint reference
        log                 the top layer: one JSON record per line, appended per write
        sealed              a checkpointed layer: {"layer": <object id of its records>}
    kept/NNNNNN-xxxxxxxx    a checkpoint rolled back past: {"layer": <object id of the
                            merged view at it, as one layer over the real directory>}

A checkpoint seals the top layer and starts a new one; a rollback deletes the layers above
the checkpoint; dropping a checkpoint merges its layer into the one above. A checkpoint a
rollback goes back past is *kept*, as git_worktree and filesystem_copy keep theirs: its
merged view is saved whole (``kept/``), so a correction's diff can still read the attempt it
replaced, a later rollback (or a restore after a failed one) can go back to it, and the
checkpoint budget can drop it like any other. The real
directory must not change during the plan: :meth:`OverlaySandbox.apply` refuses to write
over a path changed there since the sandbox was made.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import BinaryIO

from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.base import (
    ApplyResult,
    Change,
    CheckpointMissingError,
    SandboxError,
)
from cleveragents_tui.sandbox.changes import (
    Item,
    apply_items,
    changed_outside,
    changes_of,
    holds_new,
)
from cleveragents_tui.sandbox.directory_sandbox import DirectorySandbox, DirectoryStrategy
from cleveragents_tui.sandbox.home import META, Identity
from cleveragents_tui.sandbox.objectstore.files import (
    DIR_FLAGS,
    read_json_object,
    write_atomic,
    write_json,
)
from cleveragents_tui.sandbox.objectstore.names import (
    check_entry_path,
    check_link_target,
    check_oid,
    check_ref,
    join_path,
    new_ref,
    ref_seq,
    split_path,
)
from cleveragents_tui.sandbox.objectstore.tree_writer import (
    hash_path,
    list_path,
    lstat_path,
    read_path,
    readlink_path,
    remove_tree,
)
from cleveragents_tui.sandbox.objectstore.trees import DIRECTORY, FILE, SYMLINK, Entry
from cleveragents_tui.sandbox.overlay_layers import (
    GONE,
    SPECIAL,
    WHITEOUT,
    Layer,
    Node,
    encode_layer,
    fold,
    log_line,
    parse_record,
    put_node,
)
from cleveragents_tui.sandbox.safety import UnsafeInputError

_STRATEGY = SandboxStrategyName.OVERLAY


class EntryKind(StrEnum):
    FILE = "file"
    DIRECTORY = "directory"
    SYMLINK = "symlink"
    OTHER = "other"


_KIND_NAMES = {
    FILE: EntryKind.FILE,
    DIRECTORY: EntryKind.DIRECTORY,
    SYMLINK: EntryKind.SYMLINK,
    SPECIAL: EntryKind.OTHER,
}


@dataclass(frozen=True, slots=True)
class OverlayEntry:
    """One path of the merged view, as tools see it."""

    path: str
    kind: EntryKind
    mode: int
    size: int


class OverlaySandbox(DirectorySandbox):
    """One directory resource seen through copy-on-write layers (see the module docstring)."""

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

    # --- lifecycle (called by the strategy) ------------------------------------------------

    def initialise(self) -> None:
        self._layers_dir.mkdir()
        self._store.create()
        write_json(self._base_file, {"v": 1, "paths": self._lower_stats()}, durable=self._durable)
        self._save_meta()
        self._start_layer(0)

    def load(self, meta: dict[str, object]) -> None:
        names = sorted(p.name for p in self._layers_dir.iterdir() if not p.name.startswith("."))
        for position, name in enumerate(map(check_ref, names)):
            folder = self._layers_dir / name
            if (folder / "sealed").is_file():
                oid = self._sealed_id(name)
                self._layers.append(Layer(name, self._read_layer(oid), oid))
            elif position == len(names) - 1:
                log = folder / "log"
                self._layers.append(Layer(name, self._replay_log(log) if log.exists() else {}))
                self._log = open(log, "ab")  # noqa: SIM115 - kept open between writes
            else:
                raise CheckpointMissingError(
                    f"layer {name} was never sealed", "the sandbox is damaged"
                )
        if not self._layers or self._layers[-1].sealed is not None:
            self._start_layer(ref_seq(self._layers[-1].name) + 1 if self._layers else 0)
        self._view = fold([layer.entries for layer in self._layers])
        if self._kept_dir.is_dir():
            live = {layer.name for layer in self._layers}
            kept = (p.name for p in self._kept_dir.iterdir() if not p.name.startswith("."))
            self._kept = {check_ref(name): None for name in kept if name not in live}

    # --- the file operations tools use -----------------------------------------------------

    def read_bytes(self, path: str) -> bytes:
        node = self._existing(path)
        if node.kind == DIRECTORY:
            raise IsADirectoryError(errno.EISDIR, "is a directory", path)
        if node.kind != FILE:
            raise SandboxError(f"{path!r} is not a regular file", "read the file it points to")
        return self._content(path, node)

    def write_bytes(self, path: str, data: bytes, mode: int | None = None) -> None:
        """Write a file, creating missing parent directories (0o755) like ``mkdir -p``.

        ``mode`` defaults to the existing file's mode, else 0o644.
        """
        self._alive()
        if mode is not None:
            _check_mode(mode)
        self._make_parents(path)
        node = self._find(path)
        if node is not None and node.kind != FILE:
            if node.kind == DIRECTORY:
                raise IsADirectoryError(errno.EISDIR, "is a directory", path)
            raise SandboxError(f"{path!r} is not a regular file", "delete it first")
        mode = mode if mode is not None else node.mode if node else 0o644
        self._put(path, Node(FILE, mode, len(data), self._store.put_bytes(data), False))

    def delete(self, path: str) -> None:
        """Delete a file, symlink or directory (with everything in it)."""
        self._existing(path)
        self._put(path, GONE)

    def exists(self, path: str) -> bool:
        self._alive()
        return self._find(path) is not None

    def stat(self, path: str) -> OverlayEntry | None:
        self._alive()
        node = self._find(path)
        return (
            None
            if node is None
            else OverlayEntry(path, _KIND_NAMES[node.kind], node.mode, node.size)
        )

    def make_dirs(self, path: str, mode: int = 0o755) -> None:
        """Create ``path`` and any missing parents (an existing directory is fine)."""
        _check_mode(mode)
        self._make_parents(path)
        node = self._find(path)
        if node is None:
            self._put(path, Node(DIRECTORY, mode, 0, "", False))
        elif node.kind != DIRECTORY:
            raise FileExistsError(errno.EEXIST, "exists and is not a directory", path)

    def chmod(self, path: str, mode: int) -> None:
        node = self._existing(path)
        mode = _check_mode(mode)
        if node.kind == FILE and not node.ref:  # copy up from the real directory
            data = read_path(self._real, path)
            node = node._replace(size=len(data), ref=self._store.put_bytes(data))
        elif node.kind not in (FILE, DIRECTORY):
            raise SandboxError(f"{path!r} is not a file or directory", "symlinks have no mode")
        self._put(path, node._replace(mode=mode))

    def symlink(self, path: str, target: str) -> None:
        """Create a symlink; its target must stay inside the sandbox."""
        self._alive()
        check_link_target(check_entry_path(path), target)
        self._make_parents(path)
        if self._find(path) is not None:
            raise FileExistsError(errno.EEXIST, "already exists", path)
        self._put(path, Node(SYMLINK, 0o777, len(target), target, False))

    def move(self, source: str, destination: str) -> None:
        """Rename a file, symlink or directory (with everything in it) to a new path.

        Recorded as what the merged view becomes: every moved entry at its new path (the
        directory on top opaque, a real file's content copied into the object store, since
        a record of a real file means "the real file at this same path"), then a whiteout at
        the old path, all in one append to the log. ``destination`` must not exist; missing
        parent directories are made. Links must stay inside from their new place.
        """
        self._alive()
        source, destination = check_entry_path(source), check_entry_path(destination)
        node = self._existing(source)
        if destination == source or destination.startswith(source + "/"):
            raise SandboxError(f"cannot move {source!r} into itself", "move it elsewhere")
        if self._find(destination) is not None:
            raise FileExistsError(errno.EEXIST, "already exists", destination)
        moved = [(source, node)]
        if node.kind == DIRECTORY:
            moved.extend((entry.path, self._existing(entry.path)) for entry in self.walk(source))
        records: list[tuple[str, Node]] = []
        for old, each in moved:
            new = destination + old[len(source) :]
            if each.kind == SPECIAL:
                raise SandboxError(f"{old!r} is a special file", "only files, links, folders move")
            if each.kind == FILE and not each.ref:
                data = read_path(self._real, old)
                each = each._replace(size=len(data), ref=self._store.put_bytes(data))
            elif each.kind == SYMLINK:
                check_link_target(new, each.ref)
            elif each.kind == DIRECTORY:
                each = each._replace(opaque=old == source)
            records.append((new, each))
        self._make_parents(destination)
        self._put_all([*records, (source, GONE)])

    def read_link(self, path: str) -> str:
        node = self._existing(path)
        if node.kind != SYMLINK:
            raise SandboxError(f"{path!r} is not a symlink", "use read_bytes")
        return node.ref

    def list_dir(self, path: str = "") -> list[str]:
        """The names in directory ``path`` ("" is the top), sorted."""
        self._alive()
        if path and self._existing(path).kind != DIRECTORY:
            raise NotADirectoryError(errno.ENOTDIR, "not a directory", path)
        names: set[str] = set()
        if not self._hidden(path, self._view, including=True):
            for name in list_path(self._real, path):
                if _visible_name(join_path(path, name)):
                    names.add(name)
        for child, node in self._view.items():
            parent, name = split_path(child)
            if parent == path:
                (names.discard if node.kind == WHITEOUT else names.add)(name)
        return sorted(names)

    def walk(self, path: str = "") -> list[OverlayEntry]:
        """Every entry below ``path`` in the merged view, parents first, sorted."""
        out: list[OverlayEntry] = []
        for name in self.list_dir(path):
            child = join_path(path, name)
            node = self._existing(child)
            out.append(OverlayEntry(child, _KIND_NAMES[node.kind], node.mode, node.size))
            if node.kind == DIRECTORY:
                out.extend(self.walk(child))
        return out

    # --- the Sandbox protocol --------------------------------------------------------------

    @property
    def workdir(self) -> None:
        return None

    def checkpoint(self) -> str:
        """Seal the top layer (its reference is returned) and start a new one."""
        self._alive()
        top = self._layers[-1]
        oid = self._store.put_bytes(encode_layer(top.entries))
        self._store.sync()
        write_json(
            self._layers_dir / top.name / "sealed", {"v": 1, "layer": oid}, durable=self._durable
        )
        self._close_log()
        (self._layers_dir / top.name / "log").unlink(missing_ok=True)
        top.sealed = oid
        self._start_layer(ref_seq(top.name) + 1)
        return top.name

    def verify(self, ref: str) -> None:
        """The layers up to ``ref`` are sealed, intact, and every content object is good."""
        self._alive()
        if self._is_kept(ref):
            for node in self._kept_view(ref).values():
                if node.kind == FILE:
                    self._store.check(node.ref)
            return
        for layer in self._layers[: self._position(ref) + 1]:
            oid = self._sealed_id(layer.name)
            for node in self._read_layer(oid).values():
                if node.kind == FILE:
                    self._store.check(node.ref)

    def rollback(self, ref: str, *, current: str | None = None) -> None:
        """Delete the layers above ``ref`` and start an empty one on top; the checkpoints
        deleted are kept first. Back to a kept checkpoint, every layer goes (kept) and its
        view becomes the one sealed layer."""
        self._alive()
        self.verify(ref)
        if self._is_kept(ref):
            view = self._kept_view(ref)
            self._keep(0)
            self._close_log()
            for layer in self._layers:
                remove_tree(self._layers_dir / layer.name)
            folder = self._layers_dir / ref
            folder.mkdir()
            oid = self._store.put_bytes(encode_layer(view))
            self._store.sync()
            write_json(folder / "sealed", {"v": 1, "layer": oid}, durable=self._durable)
            self._layers = [Layer(ref, dict(view), oid)]
            (self._kept_dir / ref).unlink()
            del self._kept[ref]
        else:
            position = self._position(ref)
            self._keep(position + 1)
            self._close_log()
            for layer in reversed(self._layers[position + 1 :]):
                remove_tree(self._layers_dir / layer.name)
            del self._layers[position + 1 :]
        self._start_layer(ref_seq(ref) + 1)
        self._view = fold([layer.entries for layer in self._layers])
        self._collect_garbage()

    def diff(self, old_ref: str, new_ref: str) -> list[Change]:
        self._alive()
        return list(changes_of(self._items(self._view_at(old_ref), self._view_at(new_ref))))

    def read(self, ref: str, path: str) -> bytes | None:
        """A file's bytes at ``ref``; a symlink's target; None for a directory or nothing."""
        self._alive()
        node = self._resolve(self._view_at(ref), check_entry_path(path))
        if node is None or node.kind in (DIRECTORY, SPECIAL):
            return None
        if node.kind == SYMLINK:
            return os.fsencode(node.ref)
        return self._content(path, node)

    def changes_since_baseline(self) -> list[Change]:
        self._alive()
        return list(changes_of(self._items({}, self._view)))

    def pending_changes(self) -> list[Change]:
        """What Apply would land: ``changes_since_baseline``, which only reads."""
        return self.changes_since_baseline()

    def drop_checkpoint(self, ref: str) -> None:
        """Merge ``ref``'s layer into the one above it; the state at every other ref holds.
        A kept checkpoint is simply forgotten."""
        self._alive()
        if self._is_kept(ref):
            (self._kept_dir / ref).unlink()
            del self._kept[ref]
            self._collect_garbage()
            return
        position = self._position(ref)
        below, above = self._layers[position], self._layers[position + 1]
        merged = dict(below.entries)
        for path in sorted(above.entries):
            put_node(merged, path, above.entries[path])
        folder = self._layers_dir / above.name
        if above.sealed is not None:
            oid = self._store.put_bytes(encode_layer(merged))
            self._store.sync()
            write_json(folder / "sealed", {"v": 1, "layer": oid}, durable=self._durable)
            above.sealed = oid
        else:
            self._close_log()
            lines = b"".join(log_line(path, merged[path]) for path in sorted(merged))
            write_atomic(folder / "log", lines, durable=self._durable)
            self._log = open(folder / "log", "ab")  # noqa: SIM115 - kept open between writes
        above.entries = merged
        remove_tree(self._layers_dir / below.name)
        del self._layers[position]
        self._collect_garbage()

    def apply(self) -> ApplyResult:
        """Write the merged result to the real directory, then start over from it.

        Refused, with nothing written, when a path to be written or deleted changed in the
        real directory since the sandbox was made. Afterwards the layers are folded away
        (their changes are now in the real directory), so earlier checkpoints are gone.
        """
        self._alive()
        items = self._items({}, self._view)
        if not items:
            return ApplyResult(f"nothing to apply to {self._real}", ())
        base = self._read_base()
        conflicts = [
            item.path
            for item in items
            if self._foreign(item.path, base)
            and not holds_new(self._real, item)
            and not _removed_on_the_way(self._real, item, base)
        ]
        if conflicts:
            raise changed_outside(self._real, conflicts)
        for item in items:
            if item.new is not None:
                self._check_parent(item.path)
                if item.new.kind == FILE:
                    self._store.check(item.new.ref)
        apply_items(self._real, items, self._store, durable=self._durable)
        for item in items:
            st = lstat_path(self._real, item.path)
            if st is None:
                base.pop(item.path, None)
            else:
                base[item.path] = _stat_key(st)
        write_json(self._base_file, {"v": 1, "paths": base}, durable=self._durable)
        self._close_log()
        for layer in self._layers:
            remove_tree(self._layers_dir / layer.name)
        remove_tree(self._kept_dir)  # their views read the real directory as it was
        self._kept = {}
        last = ref_seq(self._layers[-1].name)
        self._layers, self._view = [], {}
        self._save_meta()
        self._start_layer(last + 1)
        self._collect_garbage()
        changes = changes_of(items)
        return ApplyResult(f"{len(changes)} change(s) written to {self._real}", changes)

    def discard(self) -> None:
        """Remove the sandbox's folder and everything in it (again: nothing to do)."""
        self._close_log()
        super().discard()

    # --- extras ----------------------------------------------------------------------------

    def checkpoints(self) -> list[str]:
        """The references of the checkpoints kept, oldest first."""
        return [layer.name for layer in self._layers if layer.sealed is not None]

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
            if _visible_name(child):
                found.append(child)
                found.extend(self._lower_below(child))
        return found

    def _content(self, path: str, node: Node) -> bytes:
        if node.ref:
            return self._store.read_bytes(node.ref, limit=node.size)
        return read_path(self._real, path)

    def _view_at(self, ref: str) -> dict[str, Node]:
        if self._is_kept(ref):
            return self._kept_view(ref)
        return fold([layer.entries for layer in self._layers[: self._position(ref) + 1]])

    def _is_kept(self, ref: str) -> bool:
        """A checkpoint a rollback went back past (a live layer of that name wins)."""
        return check_ref(ref) in self._kept and not any(
            layer.name == ref and layer.sealed is not None for layer in self._layers
        )

    def _kept_view(self, ref: str) -> dict[str, Node]:
        view = self._kept[ref]
        if view is None:
            oid = check_oid(read_json_object(self._kept_dir / ref).get("layer"))
            view = self._kept[ref] = self._read_layer(oid)
        return view

    def _keep(self, start: int) -> None:
        """Save the merged view at every sealed layer from position ``start`` up, before a
        rollback deletes them (a view already saved stays as it is)."""
        view = fold([layer.entries for layer in self._layers[:start]])
        for layer in self._layers[start:]:
            for path in sorted(layer.entries):
                put_node(view, path, layer.entries[path], strict=True)
            if layer.sealed is None or layer.name in self._kept:
                continue
            oid = self._store.put_bytes(encode_layer(view))
            self._store.sync()
            self._kept_dir.mkdir(exist_ok=True)
            write_json(self._kept_dir / layer.name, {"v": 1, "layer": oid}, durable=self._durable)
            self._kept[layer.name] = dict(view)

    def _position(self, ref: str) -> int:
        check_ref(ref)
        for position, layer in enumerate(self._layers):
            if layer.name == ref and layer.sealed is not None:
                return position
        raise CheckpointMissingError(
            f"checkpoint {ref} of {self._resource.resource_id} does not exist",
            "it was dropped, rolled back past, applied, or never made here",
        )

    # --- comparing -------------------------------------------------------------------------

    def _items(self, old: dict[str, Node], new: dict[str, Node]) -> list[Item]:
        paths = set(old) | set(new)
        for view in (old, new):
            for path, node in view.items():
                if node.hides_below():
                    paths.update(self._lower_below(path))
        items = []
        for path in sorted(paths):
            was, now = self._resolve(old, path), self._resolve(new, path)
            if was is None and now is None:
                continue
            if was is not None and now is not None and self._same(path, was, now):
                continue
            items.append(Item(path, _entry(was), _entry(now)))
        return items

    def _same(self, path: str, was: Node, now: Node) -> bool:
        if (was.kind, was.mode) != (now.kind, now.mode):
            return False
        if was.kind != FILE or was.ref == now.ref:  # directories and specials have no ref
            return was.ref == now.ref
        if was.ref and now.ref:
            return False
        return hash_path(self._real, path) == (was.ref or now.ref)  # one is the real file

    def _check_parent(self, path: str) -> None:
        """Refuse (before writing anything) a path whose parent is not a real directory."""
        parent, _ = split_path(path)
        if parent:
            node = self._resolve(self._view, parent)
            if node is None or node.kind != DIRECTORY:
                raise UnsafeInputError(
                    f"{path!r} would be written below {parent!r}, which is not a directory",
                    "nothing was applied; the sandbox's layers are damaged",
                )

    def _foreign(self, path: str, base: dict[str, list[int]]) -> bool:
        """Whether the real directory's ``path`` changed since creation (or our last apply)."""
        st = lstat_path(self._real, path)
        return (None if st is None else _stat_key(st)) != base.get(path)

    def _lower_stats(self) -> dict[str, list[int]]:
        """lstat of every path of the real directory, so apply can tell what changed there."""
        found: dict[str, list[int]] = {}

        def visit(fd: int, rel: str) -> None:
            with os.scandir(fd) as items:
                for item in items:
                    path = join_path(rel, item.name)
                    if not _visible_name(path):
                        continue
                    st = item.stat(follow_symlinks=False)
                    found[path] = _stat_key(st)
                    if stat.S_ISDIR(st.st_mode):
                        sub = os.open(item.name, DIR_FLAGS, dir_fd=fd)
                        try:
                            visit(sub, path)
                        finally:
                            os.close(sub)

        root = os.open(self._real, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            visit(root, "")
        finally:
            os.close(root)
        return found

    def _read_base(self) -> dict[str, list[int]]:
        paths = read_json_object(self._base_file).get("paths")
        if not isinstance(paths, dict):
            raise CheckpointMissingError(f"{self._base_file} is damaged", "discard the sandbox")
        return paths

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

    def _collect_garbage(self) -> None:
        keep: set[str] = set()
        for layer in self._layers:
            if layer.sealed is not None:
                keep.add(layer.sealed)
            keep.update(node.ref for node in layer.entries.values() if node.kind == FILE)
        for ref in self._kept:
            keep.add(check_oid(read_json_object(self._kept_dir / ref).get("layer")))
            keep.update(n.ref for n in self._kept_view(ref).values() if n.kind == FILE)
        self._store.sweep(keep)


class OverlayStrategy(DirectoryStrategy[OverlaySandbox]):
    """Makes :class:`OverlaySandbox` es (``durable``: flush each checkpoint to the disk)."""

    name = _STRATEGY
    sandbox_type = OverlaySandbox


def _removed_on_the_way(lower: Path, item: Item, base: dict[str, list[int]]) -> bool:
    """A path the real directory had at creation, now missing, that the plan replaces with
    another kind (or link): an Apply a crash stopped removed it before writing the new one."""
    known = base.get(item.path)
    if known is None or item.new is None or lstat_path(lower, item.path) is not None:
        return False
    was = {stat.S_IFDIR: DIRECTORY, stat.S_IFLNK: SYMLINK, stat.S_IFREG: FILE}.get(
        stat.S_IFMT(known[0])
    )
    return was != item.new.kind or item.new.kind == SYMLINK


def _stat_key(st: os.stat_result) -> list[int]:
    """What must not change for a real path to count as untouched (a folder's times do)."""
    if stat.S_ISDIR(st.st_mode):
        return [stat.S_IFMT(st.st_mode), st.st_ino, st.st_mode, 0, 0, 0]
    return [st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, 0]


def _entry(node: Node | None) -> Entry | None:
    if node is None:
        return None
    return Entry(node.kind, node.mode, node.size, 0, 0, 0, node.ref)


def _check_mode(mode: int) -> int:
    if not 0 <= mode <= 0o777:
        raise SandboxError(f"mode {mode:o} is not allowed", "use permission bits only (0-0o777)")
    return mode


def _visible_name(path: str) -> bool:
    """Whether a real-directory path is reachable through the sandbox (a safe name)."""
    try:
        check_entry_path(path)
    except UnsafeInputError:
        return False
    return True
