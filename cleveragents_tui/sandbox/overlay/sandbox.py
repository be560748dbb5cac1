"""The ``overlay`` sandbox: its lifecycle, the Sandbox protocol, and Apply.

What the layers hold is compared with the real directory (read, diff, pending changes),
and Apply writes it there, refusing a path changed there since the sandbox was made; the
record of the real directory at creation (``base.json``) is kept here.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from cleveragents_tui.domain.wording import counted
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
from cleveragents_tui.sandbox.objectstore.files import DIR_FLAGS, read_json_object, write_json
from cleveragents_tui.sandbox.objectstore.names import (
    check_entry_path,
    check_ref,
    join_path,
    ref_seq,
    split_path,
)
from cleveragents_tui.sandbox.objectstore.tree_writer import hash_path, lstat_path, remove_tree
from cleveragents_tui.sandbox.objectstore.trees import DIRECTORY, FILE, SYMLINK, Entry
from cleveragents_tui.sandbox.overlay.checkpoints import OverlayCheckpoints
from cleveragents_tui.sandbox.overlay.core import visible_name
from cleveragents_tui.sandbox.overlay.layers import SPECIAL, Layer, Node, fold
from cleveragents_tui.sandbox.safety import UnsafeInputError


class OverlaySandbox(OverlayCheckpoints):
    """One directory resource seen through copy-on-write layers (see the package docstring)."""

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

    # --- the Sandbox protocol --------------------------------------------------------------

    @property
    def workdir(self) -> None:
        return None

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

    def apply_refusal(self) -> SandboxError | None:
        """Apply's refusal over paths changed in the real directory, read only (a dry run)."""
        self._alive()
        conflicts = self._conflicts(self._items({}, self._view), self._read_base())
        return changed_outside(self._real, conflicts) if conflicts else None

    def _conflicts(self, items: list[Item], base: dict[str, list[int]]) -> list[str]:
        """The paths of ``items`` someone else changed in the real directory since the
        sandbox was made (``base``: their stat keys then)."""
        return [
            item.path
            for item in items
            if self._foreign(item.path, base)
            and not holds_new(self._real, item)
            and not _removed_on_the_way(self._real, item, base)
        ]

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
        conflicts = self._conflicts(items, base)
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
        return ApplyResult(f"{counted(len(changes), 'change')} written to {self._real}", changes)

    def discard(self) -> None:
        """Remove the sandbox's folder and everything in it (again: nothing to do)."""
        self._close_log()
        super().discard()

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
                    if not visible_name(path):
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
