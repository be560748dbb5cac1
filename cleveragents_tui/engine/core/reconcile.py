"""Reconciliation: files someone else changed in a plan's sandboxes while it was stopped,
kept or discarded (behaviour spec, Human-in-the-Loop). The runner seals each directory
sandbox when it stops in Execute (a listing and a checkpoint), compares before it goes on,
and asks; a revert lists them in its preview and keeps (:func:`hold`, :meth:`Held.reapply`)
or discards them. How, the scope and what it cannot see: docs/reconciliation.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property
from pathlib import Path

from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.engine.core.file_diff import shown_path
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes
from cleveragents_tui.sandbox.safety import UnsafeInputError

SEAL_FILE = "reconcile.json"
WATCHED = frozenset({SandboxStrategyName.GIT_WORKTREE, SandboxStrategyName.FILESYSTEM_COPY})

Listing = dict[str, tuple[str, int, int, int]]  # path -> (kind, size, mtime_ns, mode)


class OutsideChoice(StrEnum):
    """What a revert does with files changed outside the plan in a sandbox it rolls back."""

    KEEP = "keep"  # re-applied on top of the rolled-back state, before the replay
    DISCARD = "discard"  # rolled back with the sandbox


@dataclass(frozen=True)
class OutsideChanges:
    """What changed in one sandbox since it was sealed, paths relative to its folder."""

    resource_id: str
    added: tuple[str, ...]
    modified: tuple[str, ...]
    deleted: tuple[str, ...]

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(sorted((*self.added, *self.modified, *self.deleted)))

    def summary(self, limit: int = 5) -> str:
        """``R: a.py (modified), b.txt (added) +3 more`` for questions and events."""
        kinds = {p: "added" for p in self.added}
        kinds |= {p: "modified" for p in self.modified}
        kinds |= {p: "deleted" for p in self.deleted}
        # a name as one line of valid text: it goes into events and questions in the store
        shown = [f"{shown_path(p)} ({kinds[p]})" for p in self.paths[:limit]]
        more = len(self.paths) - limit
        return f"{self.resource_id}: {', '.join(shown)}" + (f" +{more} more" if more > 0 else "")


def scan(folder: str | Path) -> Listing:
    """Every entry under ``folder`` (symlinks not followed). The root's ``.git`` is left out:
    in a git worktree it is git's link file, not the user's content. (Walked with the
    entries' own path strings: a correction's preview scans at every look, issue 22.)"""
    listing: Listing = {}
    pending = [(os.fspath(folder), "")]
    while pending:
        directory, prefix = pending.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                if not prefix and entry.name == ".git":
                    continue
                path = prefix + entry.name
                info = entry.stat(follow_symlinks=False)
                mode = info.st_mode
                if stat.S_ISDIR(mode):
                    listing[path] = ("dir", 0, 0, stat.S_IMODE(mode))
                    pending.append((entry.path, path + "/"))
                else:
                    kind = "link" if stat.S_ISLNK(mode) else "file"
                    listing[path] = (kind, info.st_size, info.st_mtime_ns, mode)
    return listing


def compare(resource_id: str, sealed: Listing, now: Listing) -> OutsideChanges | None:
    if now == sealed:  # the common case, one comparison
        return None
    added = tuple(sorted(p for p in now if p not in sealed))
    deleted = tuple(sorted(p for p in sealed if p not in now))
    modified = tuple(sorted(p for p in now if p in sealed and now[p] != sealed[p]))
    if not (added or deleted or modified):
        return None
    return OutsideChanges(resource_id, added, modified, deleted)


def fingerprint(changes: Iterable[OutsideChanges]) -> str:
    """A short stable id of a set of changes: a new edit asks again, the same one does not."""
    digest = hashlib.sha256()
    for change in changes:
        digest.update(json.dumps([change.resource_id, change.paths]).encode())
    return digest.hexdigest()[:12]


class Reconciler:
    """The seals of one plan's sandboxes, kept in ``<sandbox base>/<plan>/reconcile.json``."""

    def __init__(
        self,
        sandboxes: PlanSandboxes,
        resource_ids: Iterable[str],
        attempt: int,
        plan_id: str | None = None,
    ):
        """``plan_id``: whose seals (default: the plan of ``sandboxes``)."""
        self._sandboxes = sandboxes
        self._resource_ids = tuple(resource_ids)
        self._attempt = attempt
        # a string: a preview only reads it (a path object costs more than the read)
        self._seals = os.path.join(sandboxes.base_dir, plan_id or sandboxes.plan_id, SEAL_FILE)

    # -- the seal file ----------------------------------------------------------------------

    def _load(self, *, drop_stale: bool = True) -> dict[str, dict[str, object]]:
        """The seals of this attempt; seals of an older attempt are dropped (a correction
        rolled the sandboxes back since, so they describe nothing current) — or, for a mere
        read (``drop_stale`` false), only ignored."""
        try:
            data = json.loads(_read(self._seals))
        except FileNotFoundError:
            return {}
        seals: dict[str, dict[str, object]] = data.get("resources", {})
        if data.get("attempt") != self._attempt:
            if drop_stale:
                self._drop_refs(seals)
                self._file.unlink(missing_ok=True)
            return {}
        return seals

    @cached_property
    def _file(self) -> Path:
        return Path(self._seals)

    def _save(self, seals: dict[str, dict[str, object]]) -> None:
        self._file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"attempt": self._attempt, "resources": seals}), "utf-8")
        os.replace(tmp, self._file)

    def _drop_refs(self, seals: dict[str, dict[str, object]]) -> None:
        for resource_id, seal in seals.items():
            with contextlib.suppress(Exception):  # a sandbox already discarded: nothing to drop
                self._sandboxes.get(resource_id).drop_checkpoint(str(seal["ref"]))

    def _watched(self, resource_ids: Iterable[str] | None = None) -> dict[str, Path]:
        folders = {}
        for resource_id in self._resource_ids if resource_ids is None else resource_ids:
            sandbox = self._sandboxes.get(resource_id)
            if sandbox.resource.sandbox_strategy in WATCHED and sandbox.workdir is not None:
                folders[resource_id] = sandbox.workdir
        return folders

    # -- operations -------------------------------------------------------------------------

    def seal(self) -> None:
        """Record the sandboxes as the plan leaves them (a checkpoint only where they changed
        since the last seal)."""
        seals = self._load()
        for resource_id, folder in self._watched().items():
            self._seal_one(seals, resource_id, folder)
        self._save(seals)

    def refresh(self, resource_ids: Iterable[str]) -> None:
        """The plan wrote to these resources: seal again, as they are now, those that are
        sealed, so the plan's own writes are never taken for someone else's. Nothing is
        sealed before the plan first stops, so a run that never stopped pays nothing.

        An appended plan writes in its host's sandboxes, so its writes are the host's own
        too: the host's seals are refreshed as well (the host, stopped while the appended
        plan waited and then resumed, took them for someone else's)."""
        written = tuple(dict.fromkeys(resource_ids))
        self._refresh(written)
        host = self._sandboxes.host_plan_id
        if host != self._sandboxes.plan_id:
            with self._sandboxes.store.unit_of_work() as uow:
                attempt = uow.plans.get(host).attempt
            Reconciler(self._sandboxes, written, attempt, plan_id=host)._refresh(written)

    def _refresh(self, resource_ids: Iterable[str]) -> None:
        seals = self._load()
        sealed = [r for r in dict.fromkeys(resource_ids) if r in seals and r in self._resource_ids]
        changed = False
        for resource_id, folder in self._watched(sealed).items():
            changed |= self._seal_one(seals, resource_id, folder)
        if changed:
            self._save(seals)

    def _seal_one(
        self, seals: dict[str, dict[str, object]], resource_id: str, folder: Path
    ) -> bool:
        """Seal one folder as it is; False when it is as sealed already."""
        listing = scan(folder)
        old = seals.get(resource_id)
        if old is not None and _listing(old) == listing:
            return False
        sandbox = self._sandboxes.get(resource_id)
        ref = sandbox.checkpoint()
        if old is not None:
            sandbox.drop_checkpoint(str(old["ref"]))
        seals[resource_id] = {"ref": ref, "files": listing, "folder": str(folder)}
        return True

    def outside_changes(self) -> list[OutsideChanges]:
        """What differs from the seals now (empty when nothing was sealed). Only reads, so a
        correction's preview can ask: a sandbox without a seal is not even opened. Each
        sealed folder is scanned at every call (a file edited in place changes no folder's
        time); the seal file is read at every call too, and parsed once per content."""
        attempt, seals = _sealed(self._seals)
        if attempt != self._attempt:  # an older attempt's seals describe nothing current
            return []
        found = []
        for resource_id in dict.fromkeys(self._resource_ids):
            seal = seals.get(resource_id)
            now = None if seal is None else self._scan_sealed(resource_id, seal[0])
            if seal is not None and now is not None:
                change = compare(resource_id, seal[1], now)
                if change is not None:
                    found.append(change)
        return found

    def _scan_sealed(self, resource_id: str, folder: str | None) -> Listing | None:
        """The sealed sandbox's folder scanned, found as its seal names it (opening a sandbox
        to learn its folder reads its records and index: 80% of a preview's look at the
        files, issue 22); the sandbox is opened for a seal written before seals named it,
        or whose folder is gone (opening says why). None: not a watched sandbox now."""
        if folder is not None:
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                return scan(folder)
        opened = self._watched([resource_id]).get(resource_id)
        return None if opened is None else scan(opened)

    def hold(self, changes: Iterable[OutsideChanges]) -> Held:
        """Copy the added and modified entries of ``changes`` aside, next to the seals (the
        same disk; never in memory: a hand edit may be a large file)."""
        held = tuple(changes)
        folders = self._watched(c.resource_id for c in held)
        self._file.parent.mkdir(parents=True, exist_ok=True)
        copies = Path(tempfile.mkdtemp(prefix="outside-held-", dir=self._file.parent))
        for number, change in enumerate(held):
            for path in sorted((*change.added, *change.modified), key=_depth):
                _copy_entry(folders[change.resource_id] / path, copies / str(number) / path)
        return Held(held, folders, copies)

    def keep(self) -> None:
        """Accept the outside changes: they become part of the sealed state."""
        self.seal()

    def discard(self, changes: Iterable[OutsideChanges]) -> None:
        """Put the changed sandboxes back exactly as sealed."""
        seals = self._load()
        folders = self._watched()
        for change in changes:
            self._sandboxes.get(change.resource_id).rollback(str(seals[change.resource_id]["ref"]))
            # Restored files have new modification times: seal what is there now.
            seals[change.resource_id]["files"] = scan(folders[change.resource_id])
        self._save(seals)


def _read(path: str) -> bytes:
    """The file's bytes, through the file descriptor: a preview reads the seals at every
    look (issue 22), and a file object costs more than the read."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


# a seal file's path -> (its bytes, as :func:`_sealed` parsed them), for a few paths
_PARSED: dict[str, tuple[bytes, tuple[object, dict[str, tuple[str | None, Listing]]]]] = {}
_PARSED_KEPT = 16


def _sealed(path: str) -> tuple[object, dict[str, tuple[str | None, Listing]]]:
    """(attempt, resource -> (folder, listing)) of the seal file at ``path``, read now; the
    parse is kept for the same bytes only (a preview reads the seals at every look, issue
    22): whatever wrote the file and whenever, other bytes are parsed again. ``(None, {})``
    when there is no file. The listings are shared: only read them."""
    try:
        data = _read(path)
    except FileNotFoundError:
        return None, {}
    kept = _PARSED.get(path)
    if kept is not None and kept[0] == data:
        return kept[1]
    loaded = json.loads(data)
    seals: dict[str, dict[str, object]] = loaded.get("resources", {})
    parsed = (
        loaded.get("attempt"),
        {
            r: (folder if isinstance(folder := seal.get("folder"), str) else None, _listing(seal))
            for r, seal in seals.items()
        },
    )
    if len(_PARSED) >= _PARSED_KEPT:
        _PARSED.clear()  # one statement: safe beside another thread's preview
    _PARSED[path] = (data, parsed)
    return parsed


def _listing(seal: dict[str, object]) -> Listing:
    files = seal["files"]
    assert isinstance(files, dict)
    return {path: tuple(value) for path, value in files.items()}


# -- keeping outside changes across a rollback (a revert's reconciliation) ---------------------


@dataclass(frozen=True)
class Held:
    """Outside changes copied aside before a rollback, to put back on top of its result."""

    changes: tuple[OutsideChanges, ...]
    folders: dict[str, Path]  # resource -> the sandbox folder the changes are in
    copies: Path  # <copies>/<n>/<path>: the n-th change's added and modified entries

    def reapply(self) -> None:
        """Make each changed path as it was when held: deleted ones deleted (deepest first),
        added and modified ones copied back (parents first), on whatever the rollback left."""
        for number, change in enumerate(self.changes):
            folder = self.folders[change.resource_id]
            for path in sorted(change.deleted, key=_depth, reverse=True):
                _remove(_inside(folder, path))
            for path in sorted((*change.added, *change.modified), key=_depth):
                _copy_entry(self.copies / str(number) / path, _inside(folder, path))

    def drop(self) -> None:
        shutil.rmtree(self.copies, ignore_errors=True)


def _depth(path: str) -> int:
    return path.count("/")


def _inside(folder: Path, path: str) -> Path:
    """``folder / path``, refused when a symlink the rollback left on the way leads out."""
    target = folder / path
    base = folder.resolve()
    parent = target.parent.resolve()
    if parent != base and base not in parent.parents:
        raise UnsafeInputError(
            f"{path!r} resolves outside the sandbox after the rollback", "remove the symlink"
        )
    return target


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def _copy_entry(source: Path, target: Path) -> None:
    """``target`` made as ``source`` is: a folder (its mode), a symlink (its text), or a
    file (its bytes and mode); whatever was at ``target`` before is replaced."""
    info = source.lstat()
    target.parent.mkdir(parents=True, exist_ok=True)
    if stat.S_ISDIR(info.st_mode):
        if not target.is_dir() or target.is_symlink():
            _remove(target)
        target.mkdir(exist_ok=True)
        target.chmod(stat.S_IMODE(info.st_mode))
        return
    _remove(target)
    if stat.S_ISLNK(info.st_mode):
        target.symlink_to(os.readlink(source))
    else:
        shutil.copy2(source, target, follow_symlinks=False)
