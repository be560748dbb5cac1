"""The git_worktree sandbox's checkout: the worktree, the git processes pinned to it, and
the commits and refs it writes.

:class:`WorktreeCheckout` holds the sandbox's state; checkpoints (:mod:`.checkpoints`), the
two rollback paths (:mod:`.rollback`) and the Sandbox protocol (:mod:`.worktree`) build on
it, in that order (layout: :mod:`cleveragents_tui.sandbox.git`).
"""

from __future__ import annotations

import secrets
import time
import weakref
from collections.abc import Collection
from pathlib import Path

from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.base import OfResource, SandboxError
from cleveragents_tui.sandbox.git.blind_spots import BlindSpots
from cleveragents_tui.sandbox.git.process import FSCK, IDENTITY, Git, GitPipe, full_sha, release
from cleveragents_tui.sandbox.git.repository import Names, Repository
from cleveragents_tui.sandbox.git.staging import UNTOUCHED, UntouchedMark
from cleveragents_tui.sandbox.safety import UnsafeInputError, safe_relative_path


class WorktreeCheckout(OfResource):
    """One plan's worktree of one git repository, and what every layer above shares."""

    def __init__(
        self,
        resource: Resource,
        names: Names,
        repository: Repository,
        workdir: Path,
        admin_dir: Path,
        base: str,
        tip: str,
        spots: BlindSpots | None,
    ) -> None:
        self._resource = resource
        self._names = names
        self._repository = repository
        self._workdir = workdir
        self._admin_dir = admin_dir
        self._base = full_sha(base)
        # The branch's tip as this object last set it: the parent of the next checkpoint.
        # The branch is a chain of checkpoints; a commit an agent makes inside the sandbox is
        # captured by the next checkpoint's files but does not stay on the branch.
        self._tip = full_sha(tip)
        env = {**repository.git.env, "GIT_DIR": str(admin_dir), "GIT_WORK_TREE": str(workdir)}
        self._git = Git(workdir, env, repository.git.subject)
        self._refs = GitPipe(self._git, "update-ref", "--stdin")
        # "<commit> <parent>" lines: the names the two differ in (the parent given, grafted).
        self._diffs = GitPipe(self._git, *_DIFF_STDIN)
        self._diff_end = f"~end {secrets.token_hex(8)}\n".encode()
        # Commit objects are written from a draft file in the root folder, outside the
        # worktree; one per object, rewritten in place for each commit.
        self._draft = workdir.parent / f"commit-{secrets.token_hex(4)}.txt"
        self._objects = GitPipe(
            Git(workdir.parent, env, repository.git.subject),
            "hash-object",
            "-t",
            "commit",
            "-w",
            "--stdin-paths",
            "--no-filters",
        )
        self._release = weakref.finalize(
            self, release, self._draft, self._refs, self._objects, self._diffs
        )
        self._discarded = False
        # The index file as this object's last checkpoint or rollback left it (see _roll_from).
        self._index_seen: tuple[int, int, int] | None = None
        # Whether the worktree still holds the tip as the last checkpoint or rollback left it
        # (nobody was handed the worktree since): then a checkpoint reuses the tip's tree and
        # record instead of examining every file. Trusted only once :meth:`track_handouts`.
        self._mark = UntouchedMark(workdir.parent / UNTOUCHED, admin_dir)
        self._tree: str | None = None  # the tip's tree, when this object wrote or read it
        self._trees: dict[str, str] = {}  # checkpoints' trees, written or verified
        # What git does not keep (empty folders, ignored files, permission bits), recorded
        # beside each checkpoint; None for a sandbox made before such records were kept.
        self._spots = spots

    # ----------------------------------------------------------------------- properties

    @property
    def workdir(self) -> Path:
        """Where tools work. Whoever asks may change anything there, so the next checkpoint
        examines every file again."""
        self._mark.clear()
        return self._workdir

    def hand_out(self, paths: Collection[str] | None) -> Path:
        """The worktree, for writing ``paths`` (relative, ``/``-separated) and nothing else;
        None: anything, as :attr:`workdir`. The file tools ask before each change, naming
        what it changes. The next checkpoint then stages only the paths handed out since the
        last one, without ``git status`` (:mod:`.known_paths`), as long as nobody was handed
        the whole worktree meanwhile."""
        if paths is None:
            return self.workdir
        self._mark.note([_checked(path) for path in paths])
        return self._workdir

    def track_handouts(self) -> None:
        """Promise that whoever writes in the worktree asks for :attr:`workdir` or
        :meth:`hand_out` first, each time (the engine's tools do): then a checkpoint trusts
        that nothing changed but the paths handed out since the last checkpoint or rollback
        (none, as the rollback protocol's safety checkpoint usually finds), instead of
        examining every file."""
        self._mark.tracking = True

    @property
    def base(self) -> str:
        """The commit the sandbox started from (usable as a checkpoint reference)."""
        return self._base

    @property
    def branch(self) -> str:
        """The sandbox branch, ``refs/heads/cleveragents/<plan_id>``."""
        return self._names.branch

    # -------------------------------------------------------------------------- helpers

    def _ensure_live(self) -> None:
        if self._discarded:
            raise SandboxError(
                f"{self._git.subject}: the sandbox was discarded",
                "create a new sandbox for the plan",
            )

    def _ensure_on_branch(self) -> None:
        """Point the worktree's HEAD back at our branch if something (an agent running
        ``git checkout``) moved it, so ``reset`` can never move a branch of the user's."""
        try:
            head = (self._admin_dir / "HEAD").read_bytes()
        except OSError:
            head = b""
        if head != f"ref: {self._names.branch}\n".encode():
            self._git.run("symbolic-ref", "HEAD", self._names.branch, fix=FSCK)

    def _ref_for(self, sha: str) -> str:
        """The ref that keeps checkpoint ``sha`` alive: naming it (rather than the bare SHA)
        makes git refuse anything that is not one of this sandbox's checkpoints."""
        return self._names.base if sha == self._base else self._names.checkpoint(sha)

    def _write_tree(self) -> str:
        return full_sha(self._git.run("write-tree", fix=FSCK).decode().strip())

    def _commit(self, tree: str, parent: str, message: str) -> str:
        """Write a commit object (the format ``git commit-tree`` writes, never signed)."""
        stamp = f"{IDENTITY[0]} <{IDENTITY[1]}> {int(time.time())} +0000"
        text = f"tree {tree}\nparent {parent}\nauthor {stamp}\ncommitter {stamp}\n\n{message}"
        try:
            self._draft.write_bytes(text.encode())
        except OSError as exc:
            raise SandboxError(
                f"{self._git.subject}: cannot write {self._draft} ({exc.strerror})",
                f"check that {self._draft.parent} exists and is writable",
            ) from None
        [sha] = self._objects.ask(self._draft.name.encode() + b"\n", 1, fix=FSCK)
        return full_sha(sha.decode())

    def _update_refs(self, commands: str, fix: str) -> None:
        """One atomic ref transaction: all of ``commands`` happen, or none."""
        self._refs.ask(f"start\n{commands}commit\n".encode(), 2, fix=fix)


_DIFF_STDIN = (
    "diff-tree", "--stdin", "-r", "-z", "--name-status", "--no-commit-id", "--no-renames",
)  # fmt: skip


def _checked(path: str) -> str:
    """``path`` in its canonical relative form: inside the worktree, not in git's metadata."""
    relative = safe_relative_path(path)
    if not relative.parts or ".git" in relative.parts:
        raise UnsafeInputError(
            f"path {path!r} does not name a file of the worktree", "name a path inside it"
        )
    return relative.as_posix()
