"""Bringing the sandbox's index up to date with its files, and what a rollback from a fresh
checkpoint leaves for ``git clean``."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Collection, Iterable
from pathlib import Path

from cleveragents_tui.sandbox.base import SandboxError
from cleveragents_tui.sandbox.git.blind_spots import LIST_IGNORED, BlindSpots
from cleveragents_tui.sandbox.git.process import FSCK, Git, full_sha, reason_of
from cleveragents_tui.sandbox.git.records import Walk


def stage(
    git: Git, spots: BlindSpots | None, workdir: Path, *, list_ignored: bool = False
) -> tuple[bytes, Walk | None]:
    """Bring the sandbox's index up to date with its files; with ``list_ignored``, also
    list the ignored paths (:data:`LIST_IGNORED`, run beside ``status``, while the
    record of what git does not keep walks the worktree) and return them.

    ``git status`` (one pass over the files, untracked cache for new ones) names the
    changed paths; only those go to ``update-index``, through stdin, never as arguments.
    Deletions use ``--force-remove`` because a path under a directory that became a
    symlink cannot be examined, only dropped.
    """
    status = (
        "status",
        "--porcelain=v1",
        "-z",
        "--no-renames",
        "--untracked-files=all",
        "--ignore-submodules=dirty",
    )
    if list_ignored:
        walked = list[Walk]()
        results = git.call_together(
            status,
            LIST_IGNORED,
            meanwhile=(lambda: walked.append(spots.walk())) if spots is not None else None,
        )
        for done, args in zip(results, (status, LIST_IGNORED), strict=True):
            if done.returncode != 0:
                reason = reason_of(done.stderr, done.returncode)
                raise SandboxError(f"{git.subject}: git {args[0]} failed ({reason})", FSCK)
        out, listing = results[0].stdout, results[1].stdout
        walk = walked[0] if walked else None
    else:
        out, listing, walk = git.run(*status, fix=FSCK), b"", None
    entries = [(entry[:2], entry[3:]) for entry in out.split(b"\0") if entry]
    nested = [path for code, path in entries if code == b"??" and path.endswith(b"/")]
    if nested:
        raise SandboxError(
            f"{git.subject}: the sandbox holds a nested git repository at "
            f"{os.fsdecode(nested[0])!r}, which a checkpoint cannot capture",
            "delete it or list it in .gitignore",
        )
    removed = [path for code, path in entries if code[1:] == b"D"]
    updated = [path for code, path in entries if code[1:] not in (b" ", b"D")]
    for options, paths in (("--force-remove",), removed), (("--add", "--replace"), updated):
        if paths:
            git.run(
                "update-index",
                *options,
                "-z",
                "--stdin",
                stdin=b"\0".join(paths) + b"\0",
                fix=f"check that {workdir} is readable and the disk is not full",
            )
    return listing, walk


def needs_clean(workdir: Path, changed: Collection[bytes], untracked: bytes) -> bool:
    """Whether ``clean`` has work after a rollback from a fresh checkpoint (``_roll_from``).

    ``changed`` holds the paths the two checkpoints differ in (``diff-tree -z`` names),
    ``untracked`` the ``ls-files -z --others --directory`` output taken while ``read-tree``
    was writing, so it may list a file ``read-tree`` had just written, or a folder holding
    only such files; those are explained by ``changed``. An entry nothing explains is an
    empty folder (or what only a changed ``.gitignore`` would expose): ``clean`` runs. A
    folder that also holds written files is searched for empty folders once ``read-tree``
    is done.
    """
    if any(os.path.basename(path) == b".gitignore" for path in changed):
        return True
    return not all(
        _written_by_read_tree(workdir, entry, changed)
        for entry in filter(None, untracked.split(b"\0"))
    )


def _written_by_read_tree(workdir: Path, entry: bytes, changed: Collection[bytes]) -> bool:
    if not entry.endswith(b"/"):
        return entry in changed
    if not any(path.startswith(entry) for path in changed):
        return False
    return not _holds_empty_folder(os.path.join(os.fsencode(workdir), entry))


def _holds_empty_folder(folder: bytes) -> bool:
    """Whether ``folder`` is, or holds, a folder with nothing in it but empty folders."""
    try:
        with os.scandir(folder) as entries:
            found = list(entries)
    except OSError:
        return True  # cannot tell: let clean decide
    subfolders = [entry.path for entry in found if entry.is_dir(follow_symlinks=False)]
    return not found or any(_holds_empty_folder(path) for path in subfolders)


def index_stamp(admin_dir: Path) -> tuple[int, int, int] | None:
    """Identity of the worktree's index file: every index write replaces it."""
    try:
        found = (admin_dir / "index").stat()
    except OSError:
        return None
    return found.st_ino, found.st_size, found.st_mtime_ns


def tree_of(git: Git, sha: str) -> str:
    """The tree of commit ``sha``."""
    return full_sha(git.run("rev-parse", "--verify", f"{sha}^{{tree}}", fix=FSCK).decode().strip())


UNTOUCHED = "untouched"


class UntouchedMark:
    """A file beside the worktree saying it holds the tip exactly as the last checkpoint or
    rollback left it, except for the paths listed after the first line: ``<tip> <its tree,
    or -> <index inode> <size> <mtime>`` and a line break, then each path the tools were
    handed since, NUL-terminated. Removed before the worktree is handed to anyone for anything (so a write
    never precedes it, even in a process that then crashes) and at the start of every
    checkpoint and rollback; a path is appended before it is handed out for writing
    (:meth:`note`); written at their end only by a sandbox object whose owner promised to
    ask for the worktree before each write (``tracking``). Another process (a correction)
    can trust it too: its index must still be that file."""

    def __init__(self, path: Path, admin_dir: Path) -> None:
        self.path = path
        self._admin_dir = admin_dir
        self.tracking = False

    def clear(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink(missing_ok=True)

    def put(self, tip: str, tree: str | None, stamp: tuple[int, int, int] | None) -> None:
        """Mark ``tip`` (whose tree is ``tree``, if known) with ``stamp``, the
        :func:`index_stamp` the caller just took."""
        text = self._text(tip, stamp)
        if self.tracking and text is not None:
            text = text.replace(b" ", f" {tree or '-'} ".encode(), 1)
            with contextlib.suppress(OSError):  # a mark not written only costs a scan
                self.path.write_bytes(text)

    def note(self, paths: Iterable[str]) -> None:
        """Add ``paths`` (relative, checked) to the mark, if there is one, before they are
        written. An append torn by a crash leaves no final NUL, which :meth:`written`
        refuses; one that fails removes the mark, or raises."""
        data = b"".join(os.fsencode(path) + b"\0" for path in paths)
        if not data:
            return
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        except FileNotFoundError:
            return  # no mark: the next checkpoint examines every file anyway
        except OSError:
            self.path.unlink(missing_ok=True)
            return
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except OSError:
            self.path.unlink(missing_ok=True)
        finally:
            os.close(fd)

    def read(self, tip: str) -> tuple[str | None, list[str]] | None:
        """When the mark holds ``tip`` with the index as it was left: the tip's tree if it
        is noted, and the paths handed out for writing since (sorted, each once); None when
        it cannot be trusted."""
        if not self.tracking:
            return None
        text = self._text(tip, index_stamp(self._admin_dir))
        if text is None:
            return None
        try:
            found = self.path.read_bytes()
        except OSError:
            return None
        head, _, rest = found.partition(b"\n")
        tip_of, _, tree_and_stamp = head.partition(b" ")
        tree, _, stamp = tree_and_stamp.partition(b" ")
        if tip_of + b" " + stamp + b"\n" != text:
            return None
        if rest and not rest.endswith(b"\0"):
            return None  # torn: a write may have followed the part that is missing
        try:
            known = None if tree == b"-" else full_sha(tree.decode("ascii"))
        except (UnicodeDecodeError, SandboxError):
            return None
        return known, sorted({os.fsdecode(path) for path in rest.split(b"\0") if path})

    @staticmethod
    def _text(tip: str, stamp: tuple[int, int, int] | None) -> bytes | None:
        return None if stamp is None else f"{tip} {stamp[0]} {stamp[1]} {stamp[2]}\n".encode()
