"""How a filesystem_copy sandbox makes ``work/`` equal to a checkpoint's tree.

Split from :mod:`.filesystem_copy` (which records trees) because restoring is its own
three steps: :func:`plan_restore` walks ``work/`` once against the target tree and works
out every change (reading only files the stat cache cannot vouch for), the caller checks
every object the plan needs, then :func:`carry_out` makes only those changes, and
:func:`index_after` records the lstat details of the result as the new stat cache.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from cleveragents_tui.sandbox.base import SandboxError
from cleveragents_tui.sandbox.filesystem_index import Folder, Snapshot, StatIndex
from cleveragents_tui.sandbox.objectstore.files import DIR_FLAGS, hash_fd, open_regular
from cleveragents_tui.sandbox.objectstore.names import MAX_DEPTH, check_link_target, join_path
from cleveragents_tui.sandbox.objectstore.objects import ObjectStore
from cleveragents_tui.sandbox.objectstore.tree_writer import TreeWriter
from cleveragents_tui.sandbox.objectstore.trees import (
    DIRECTORY,
    FILE,
    SYMLINK,
    Entry,
    Tree,
    Trees,
    is_clean,
)

GIT = ".git"


def kind_of(mode: int) -> str:
    if stat.S_ISREG(mode):
        return FILE
    if stat.S_ISDIR(mode):
        return DIRECTORY
    if stat.S_ISLNK(mode):
        return SYMLINK
    return "special"


def check_depth(rel: str) -> None:
    if rel.count("/") >= MAX_DEPTH:
        raise SandboxError(f"{rel!r} is nested too deeply", f"keep trees under {MAX_DEPTH} levels")


@dataclass
class Plan:
    """What a rollback will do, worked out before anything is touched.

    ``kept`` holds the lstat of files left as they are that the stat cache did not vouch
    for (they go into the new cache); ``needed`` every blob to write, with its size.
    """

    target_stamp: int
    index_stamp: int
    ops: list[tuple[str, str, Entry | None]] = field(default_factory=list)
    needed: dict[str, int] = field(default_factory=dict)
    kept: dict[str, os.stat_result] = field(default_factory=dict)


def plan_restore(work: Path, trees: Trees, target: Snapshot, index: StatIndex | None) -> Plan:
    """Every change that makes ``work`` equal to ``target`` (nothing is changed yet)."""
    plan = Plan(target.stamp, index.snapshot.stamp if index else 0)
    fd = os.open(work, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _Planner(trees, index, plan).plan_dir(fd, "", target.root)
    finally:
        os.close(fd)
    return plan


class _Planner:
    def __init__(self, trees: Trees, index: StatIndex | None, plan: Plan) -> None:
        self._trees = trees
        self._index = index
        self._plan = plan

    def plan_dir(self, fd: int, rel: str, target: str) -> None:
        check_depth(rel)
        plan = self._plan
        index = self._index
        known = index.listing(rel) if index is not None else None
        # A folder the cache recorded as tree ``target`` holds that tree's content (with
        # lstat details): the tree need not be read. Those details are trusted under the
        # cache's stamp only, never the target's.
        recorded = known is not None and index is not None and index.folders[rel].tree == target
        want = known if recorded and known is not None else self._trees.load(target, top=not rel)
        current: dict[str, os.stat_result] = {}
        with os.scandir(fd) as items:
            for item in items:
                if rel or item.name != GIT:
                    current[item.name] = item.stat(follow_symlinks=False)
        for name, st in list(current.items()):
            entry = want.get(name)
            if entry is None or entry.kind != kind_of(st.st_mode):
                plan.ops.append(("remove", join_path(rel, name), None))
                del current[name]
        for name, entry in want.items():
            path = join_path(rel, name)
            st_now = current.get(name)
            if entry.kind == FILE:
                self.plan_file(fd, name, path, entry, st_now, known, not recorded)
            elif entry.kind == SYMLINK:
                check_link_target(path, entry.ref)
                if st_now is None or os.readlink(name, dir_fd=fd) != entry.ref:
                    plan.ops.append(("symlink", path, entry))
            elif st_now is None:
                plan.ops.append(("mkdir", path, entry))
                self.plan_new(path, entry.ref)
                plan.ops.append(("dirmode", path, entry))
            else:
                sub = os.open(name, DIR_FLAGS, dir_fd=fd)
                try:
                    self.plan_dir(sub, path, entry.ref)
                finally:
                    os.close(sub)
                if stat.S_IMODE(st_now.st_mode) != entry.mode:
                    plan.ops.append(("dirmode", path, entry))

    def plan_file(
        self,
        fd: int,
        name: str,
        path: str,
        entry: Entry,
        st: os.stat_result | None,
        known: Tree | None,
        target_stats: bool,
    ) -> None:
        """Plan file ``path``; ``target_stats``: the lstat details ``entry`` may carry are
        the target's own (a format-1 tree), trusted under the target's stamp."""
        plan = self._plan
        if st is not None:
            cached = known.get(name) if known else None
            current: str | None
            if cached is not None and is_clean(cached, st, plan.index_stamp):
                current = cached.ref  # the cache vouches for it, and keeps doing so
            else:
                plan.kept[path] = st
                if target_stats and is_clean(entry, st, plan.target_stamp):
                    current = entry.ref
                elif st.st_size != entry.size:
                    current = None
                else:
                    file_fd = open_regular(fd, name)
                    try:
                        current = hash_fd(file_fd)
                    finally:
                        os.close(file_fd)
            if current == entry.ref:
                if stat.S_IMODE(st.st_mode) != entry.mode:
                    plan.ops.append(("mode", path, entry))
                if st.st_mtime_ns != entry.mtime_ns:
                    plan.ops.append(("mtime", path, entry))
                return
        plan.ops.append(("write", path, entry))
        plan.needed[entry.ref] = entry.size

    def plan_new(self, rel: str, target: str) -> None:
        check_depth(rel)
        plan = self._plan
        for name, entry in self._trees.load(target).items():
            path = join_path(rel, name)
            if entry.kind == FILE:
                plan.ops.append(("write", path, entry))
                plan.needed[entry.ref] = entry.size
            elif entry.kind == SYMLINK:
                check_link_target(path, entry.ref)
                plan.ops.append(("symlink", path, entry))
            else:
                plan.ops.append(("mkdir", path, entry))
                self.plan_new(path, entry.ref)
                plan.ops.append(("dirmode", path, entry))


def carry_out(plan: Plan, work: Path, store: ObjectStore) -> dict[str, os.stat_result]:
    """Make the planned changes; returns the lstat of every file written or kept."""
    seen = dict(plan.kept)
    with TreeWriter(work, durable=False) as writer:
        for action, path, entry in plan.ops:
            if entry is None:
                writer.remove(path)
            elif action == "write":
                seen[path] = writer.write_object(
                    path, store, entry, mtime_ns=entry.mtime_ns, in_place=True
                )
            elif action == "mode":
                writer.set_mode(path, entry.mode)
                seen[path] = _required(writer.lstat(path), path)
            elif action == "mtime":
                seen[path] = writer.set_mtime(path, entry.mtime_ns)
            elif action == "symlink":
                writer.symlink(path, entry.ref)
            elif action == "mkdir":
                writer.make_dir(path)
            else:
                writer.set_mode(path, entry.mode)
    return seen


def index_after(
    trees: Trees, target: str, seen: dict[str, os.stat_result], old: StatIndex | None, stamp: int
) -> StatIndex:
    """The stat cache of ``work/`` once it holds tree ``target``.

    A file's lstat details come from ``seen`` (written or checked now), else from the old
    cache, which vouched for it while planning; a folder with neither kind of change keeps
    the old cache's listing as it was.
    """
    touched = _dirs_of(seen)
    folders: dict[str, Folder] = {}
    stack = [("", target)]
    while stack:
        rel, oid = stack.pop()
        listing = old.listing(rel, oid) if old is not None else None  # ``oid``'s content
        tree = listing if listing is not None else trees.load(oid, top=not rel)
        if rel not in touched and listing is not None and old is not None:
            folders[rel] = old.folders[rel]
        else:
            cached = (old.listing(rel) if old is not None else None) or {}
            entries: Tree = {}
            for name, entry in tree.items():
                if entry.kind == FILE:
                    st = seen.get(join_path(rel, name))
                    if st is not None:
                        entry = entry._replace(
                            size=st.st_size,
                            mtime_ns=st.st_mtime_ns,
                            ino=st.st_ino,
                            ctime_ns=st.st_ctime_ns,
                        )
                    elif (was := cached.get(name)) is not None and was.same_content(entry):
                        entry = was
                entries[name] = entry
            folders[rel] = Folder(oid, entries)
        for name, entry in tree.items():
            if entry.kind == DIRECTORY:
                stack.append((join_path(rel, name), entry.ref))
    return StatIndex(Snapshot(target, stamp), folders)


def _required(st: os.stat_result | None, path: str) -> os.stat_result:
    if st is None:
        raise SandboxError(f"{path!r} vanished while it was being restored", "roll back again")
    return st


def _dirs_of(paths: dict[str, os.stat_result]) -> set[str]:
    """Every directory that holds one of ``paths``, the root ``''`` included."""
    dirs = {""}
    for path in paths:
        parts = path.split("/")
        for depth in range(1, len(parts)):
            dirs.add("/".join(parts[:depth]))
    return dirs
