# Over 500 lines: GitWorktreeSandbox is one ~475-line class (open, checkpoint, both rollbacks, apply); its git plumbing is staging/known_paths.
"""The git_worktree sandbox: one plan's linked worktree of one git repository (layout,
checkpoints and the two rollback paths: :mod:`cleveragents_tui.sandbox.git`)."""

from __future__ import annotations

import os
import secrets
import shutil
import time
import weakref
from collections.abc import Collection
from pathlib import Path

from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.base import (
    ApplyResult,
    Change,
    CheckpointMissingError,
    OfResource,
    SandboxError,
)
from cleveragents_tui.sandbox.git.blind_spots import LIST_IGNORED, BlindSpots
from cleveragents_tui.sandbox.git.known_paths import stage_known
from cleveragents_tui.sandbox.git.preview import pending_changes
from cleveragents_tui.sandbox.git.process import (
    BATCH_HEADER,
    FSCK,
    IDENTITY,
    Git,
    GitPipe,
    full_sha,
    reason_of,
    release,
)
from cleveragents_tui.sandbox.git.records import Record, Walk
from cleveragents_tui.sandbox.git.repository import (
    Names,
    Repository,
    blob_listed,
    deletions,
    existing_apply,
    parse_changes,
    short_ref,
)
from cleveragents_tui.sandbox.git.staging import (
    UNTOUCHED,
    UntouchedMark,
    index_stamp,
    needs_clean,
    stage,
    tree_of,
)
from cleveragents_tui.sandbox.safety import UnsafeInputError, check_ref_name, safe_relative_path


class GitWorktreeSandbox(OfResource):
    """One plan's worktree of one git repository; see the module docstring for the layout.

    Made by :meth:`GitWorktreeStrategy.create` and reopened by
    :meth:`GitWorktreeStrategy.open`. Checkpoint references are full
    commit SHAs; :attr:`base` (the commit the sandbox started from) is accepted wherever a
    checkpoint is, so the engine can roll a resource back to its baseline.
    """

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

    # ---------------------------------------------------------------------- checkpoints

    def checkpoint(self) -> str:
        self._ensure_live()
        self._ensure_on_branch()
        spots = self._spots
        held = self._mark.read(self._tip)
        noted, written = held if held is not None else (None, None)
        known = None
        if written and spots is not None:  # paths handed out since the tip: those alone
            known = stage_known(self._git, spots, self._workdir, self._tip, written)
        # The tip's record still holds (nothing, or only files' content, changed): kept as is.
        same = written == [] or (
            known is not None and spots is not None and known == spots.load(self._tip)
        )
        if written == []:
            # Nothing can have changed since the tip: its tree and record are this state's.
            tree = self._tree or noted or tree_of(self._git, self._tip)
            scanned = spots.load(self._tip) if spots else None
        elif known is not None:  # only the paths handed out can have changed
            scanned = known
            tree = self._write_tree()
        else:
            listing, walked = stage(self._git, spots, self._workdir, list_ignored=spots is not None)
            scanned = spots.scan(listing, spots.load(self._base), walked) if spots else None
            tree = self._write_tree()
        self._mark.clear()
        # The Checkpoint-Id line makes every checkpoint a distinct commit, even of an
        # identical state on the same parent in the same second, so dropping one checkpoint
        # (which deletes its ref) never takes another decision's checkpoint with it.
        message = (
            f"cleveragents checkpoint\n\nPlan: {self._names.plan_id}\n"
            f"Checkpoint-Id: {secrets.token_hex(8)}\n"
        )
        commit = self._commit(tree, self._tip, message)
        if spots is not None and same:
            spots.record_same(commit, self._tip)
        elif spots is not None and scanned is not None:
            spots.record(commit, scanned)
        self._update_refs(
            f"update {self._names.branch} {commit}\n"
            f"create {self._names.checkpoint(commit)} {commit}\n",
            fix="check that the repository is writable (disk space, permissions)",
        )
        self._tip, self._tree = commit, tree
        self._trees[commit] = tree
        self._index_seen = index_stamp(self._admin_dir)
        self._mark.put(commit, tree, self._index_seen)
        return commit

    def verify(self, ref: str) -> None:
        self._ensure_live()
        sha = full_sha(ref)
        name = self._ref_for(sha)
        done = self._git.call(
            "cat-file", "--batch-check", stdin=f"{name}\n{sha}^{{tree}}\n".encode()
        )
        lines = [line.split() for line in done.stdout.decode().splitlines()]
        intact = (
            done.returncode == 0
            and len(lines) == 2
            and lines[0][:2] == [sha, "commit"]
            and lines[1][1:2] == ["tree"]
        )
        if not intact:
            raise CheckpointMissingError(
                f"{self._git.subject}: checkpoint {sha} is gone ({name} or its objects are missing)",
                "roll back to another decision, or correct the plan with --mode=append",
            )
        self._trees[sha] = full_sha(lines[1][0])
        if self._spots is not None:
            self._spots.verify(sha)

    def rollback(self, ref: str, *, current: str | None = None) -> None:
        self._ensure_live()
        sha = full_sha(ref)
        self._ensure_on_branch()
        self._mark.clear()
        spots = self._spots
        target = spots.load(sha) if spots is not None else None
        written = None if current is None else self._roll_from(full_sha(current), sha, target)
        if written is None:
            self._roll_fully(sha)
        if spots is not None and target is not None:
            # Then what git does not keep: from the fresh checkpoint's record when the
            # rollback started from it, else from a scan of what the full rollback left.
            if written is None:
                walked = list[Walk]()
                [listed] = self._git.call_together(
                    LIST_IGNORED, meanwhile=lambda: walked.append(spots.walk())
                )
                if listed.returncode != 0:
                    reason = reason_of(listed.stderr, listed.returncode)
                    raise SandboxError(f"{self._git.subject}: git ls-files failed ({reason})", FSCK)
                present = spots.scan(listed.stdout, spots.load(self._base), walked[0])
                spots.restore(present, target, None)
            else:
                spots.restore(spots.load(full_sha(current or "")), target, written)
        self._index_seen = index_stamp(self._admin_dir)
        self._tree = self._trees.get(sha)
        self._mark.put(sha, self._tree, self._index_seen)

    def _roll_fully(self, sha: str) -> None:
        """What ``reset --hard`` + ``clean -ffd`` do, from any state of the worktree."""
        name = self._ref_for(sha)
        # Files, index and our branch to the checkpoint, untracked files in the way
        # overwritten; checkout examines the files with the index preload, in parallel,
        # where reset looks at them one after the other.
        branch = short_ref(self._names.branch)
        done = self._git.call("checkout", "--quiet", "--force", "-B", branch, name, "--")
        if done.returncode != 0:
            self.verify(sha)
            raise SandboxError(
                f"{self._git.subject}: git checkout failed "
                f"({reason_of(done.stderr, done.returncode)})",
                f"check that {self._workdir} is writable, then retry the rollback",
            )
        self._tip = sha
        # Runs after the checkout so the .gitignore files of the checkpoint decide what is new.
        self._clean()

    def _roll_from(self, current: str, target: str, record: Record | None) -> dict[str, str] | None:
        """Roll back from checkpoint ``current``, which the caller says the worktree holds
        (the rollback protocol's safety checkpoint, taken just now): only the paths the two
        trees differ in are examined and written. None when that cannot be trusted or git
        refuses; the caller then rolls back fully (which starts from any state). Else the
        paths the two trees differ in, each with ``diff-tree``'s status letter: what git
        wrote (``M``: the same path rewritten, no folder above it made or removed).

        Trusted only when ``current`` is the last checkpoint this object took or rolled to
        and the index is the file it left (nothing staged since), so the index holds
        ``current``'s tree with fresh file times. ``read-tree -m -u <target>`` then keeps
        every entry the target shares without looking at its file (the index's cache tree
        lets it skip whole unchanged folders), writes only the rest, and refuses, before
        writing anything, if a file it must write was edited; ``reset --hard`` would examine
        every file. Beside it, with no process started for them, our branch moves and the
        running ``diff-tree`` names the changed paths (what the records restore; a
        ``.gitignore`` among them changes what ``clean`` takes). Without records, ``ls-files
        --others --directory`` runs too, listing what ``clean`` would take, which in the
        state ``current`` can only be empty folders (every other untracked file is in the
        checkpoint), so that ``clean`` (a walk of every folder) runs only when it has
        something to do. See :func:`needs_clean` for what it may see of ``read-tree`` at work.
        """
        stamp = index_stamp(self._admin_dir)
        if current != self._tip or stamp is None or stamp != self._index_seen:
            return None
        new = self._ref_for(target)
        changed: list[dict[bytes, str] | None] = []

        def meanwhile() -> None:
            # Our branch moves while git writes the files: should git refuse, the full
            # rollback moves it to the same commit.
            self._moved_to(target)
            changed.append(self._changed(current, target))

        if self._spots is not None and record is not None:
            # The records of the two states say what else differs; clean has no work here:
            # in the state ``current`` the only untracked paths are its recorded folders.
            have = self._spots.load(current)
            if not self._spots.can_start_from(have, record):
                return None
            self._spots.clear_ignored(have, record)  # none is in the way of read-tree
            [update] = self._git.call_together(("read-tree", "-m", "-u", new), meanwhile=meanwhile)
            if update.returncode != 0 or changed[0] is None:
                return None  # what git wrote is unknown: the full rollback finds out
            return {os.fsdecode(path): status for path, status in changed[0].items()}
        update, untracked = self._git.call_together(
            ("read-tree", "-m", "-u", new),
            ("ls-files", "-z", "--others", "--directory", "--exclude-standard"),
            meanwhile=meanwhile,
        )
        if update.returncode != 0:
            return None
        if (
            changed[0] is None
            or untracked.returncode != 0
            or needs_clean(self._workdir, changed[0], untracked.stdout)
        ):
            self._clean()
        return {}

    def _changed(self, old: str, new: str) -> dict[bytes, str] | None:
        """The paths checkpoints ``old`` and ``new`` differ in (``-z`` names), each with its
        status letter; None if git cannot tell. Both are this sandbox's: the caller names
        ``new`` by its ref to git."""
        try:
            request = f"{full_sha(new)} {full_sha(old)}\n".encode()
            out = self._diffs.ask_through(request, self._diff_end, fix=FSCK)
        except SandboxError:
            return None
        fields = out.split(b"\0")  # "X\0path\0" pairs, then the empty rest
        if len(fields) % 2 != 1:
            return None
        pairs = zip(fields[0:-1:2], fields[1::2], strict=True)
        return {path: status[:1].decode("ascii", "replace") for status, path in pairs}

    def _moved_to(self, target: str) -> None:
        """Our branch to ``target``, whose files the worktree and index now hold."""
        self._update_refs(
            f"update {self._names.branch} {target}\n",
            fix="check that the repository is writable, then retry the rollback",
        )
        self._tip = target

    def _clean(self) -> None:
        self._git.run(
            "clean",
            "-ffdq",
            fix=f"check that {self._workdir} is writable, then retry the rollback",
        )

    def drop_checkpoint(self, ref: str) -> None:
        self._ensure_live()
        sha = full_sha(ref)
        if sha == self._base:
            raise SandboxError(
                f"{self._git.subject}: the base commit {sha} is not a droppable checkpoint",
                "drop only references returned by checkpoint()",
            )
        self._update_refs(
            deletions([self._names.checkpoint(sha)]), fix="check that the repository is writable"
        )
        if self._spots is not None:
            self._spots.drop(sha)
        if sha == self._tip:
            self._mark.clear()  # its record is gone: the next checkpoint scans

    # -------------------------------------------------------------------------- reading

    def diff(self, old_ref: str, new_ref: str) -> list[Change]:
        self._ensure_live()
        old, new = full_sha(old_ref), full_sha(new_ref)
        args = ("diff-tree", "-r", "-z", "--no-renames", "--name-status", "--no-ext-diff")
        done = self._git.call(*args, self._ref_for(old), self._ref_for(new), "--")
        if done.returncode != 0:
            self.verify(old)
            self.verify(new)
            reason = reason_of(done.stderr, done.returncode)
            raise SandboxError(f"{self._git.subject}: git diff-tree failed ({reason})", FSCK)
        return parse_changes(done.stdout)

    def read(self, ref: str, path: str) -> bytes | None:
        self._ensure_live()
        sha = full_sha(ref)
        relative = safe_relative_path(path).as_posix()
        name = self._ref_for(sha)
        if "\n" in relative:  # cat-file --batch reads one name a line (-z: git 2.38)
            return blob_listed(self._git, name, relative, lambda: self.verify(sha))
        # One cat-file process answers both "is the checkpoint there?" and "the content".
        query = f"{name}\n{name}:".encode() + os.fsencode(relative) + b"\n"
        out = self._git.run("cat-file", "--batch", stdin=query, fix=FSCK)
        header, _, rest = out.partition(b"\n")
        found = BATCH_HEADER.match(header)
        if found is None or found[1] != b"commit":
            self.verify(sha)
            raise SandboxError(f"{self._git.subject}: cannot read checkpoint {sha}", FSCK)
        header, _, rest = rest[int(found[2]) + 1 :].partition(b"\n")
        found = BATCH_HEADER.match(header)
        if found is None or found[1] != b"blob":
            return None  # absent, a directory, or a submodule
        return rest[: int(found[2])]

    def changes_since_baseline(self) -> list[Change]:
        self._ensure_live()
        stage(self._git, self._spots, self._workdir)
        out = self._git.run(
            "diff-index",
            "--cached",
            "-z",
            "--no-renames",
            "--name-status",
            self._names.base,
            "--",
            fix=FSCK,
        )
        return parse_changes(out)

    def pending_changes(self) -> list[Change]:
        """As ``changes_since_baseline``, staged into a scratch index (a dry run of Apply)."""
        self._ensure_live()
        return pending_changes(self._git, self._admin_dir, self._workdir, self._names.base)

    # ----------------------------------------------------------------- apply and discard

    def apply(self) -> ApplyResult:
        """Commit the sandbox's current state onto the base as one commit on a new branch,
        ``cleveragents/apply/<plan_id>``; the user's checkout and branches are not touched.
        Calling it again after a success returns the same result (for crash recovery)."""
        self._ensure_live()
        branch = self._names.apply_branch
        stage(self._git, self._spots, self._workdir)
        tree = self._write_tree()
        changes = tuple(self._tree_changes(tree))
        if not changes:
            return ApplyResult(
                summary=f"nothing to apply: the sandbox of {self._resource.resource_id} has no "
                f"changes since {self._base[:12]}; no branch was created",
                changes=(),
            )
        landed = existing_apply(self._git, branch, tree, self._base)
        if landed is None:
            message = (
                f"Apply cleveragents plan {self._names.plan_id}\n\n"
                f"{len(changes)} changes made in the sandbox of {self._resource.resource_id}.\n"
            )
            landed = self._commit(tree, self._base, message)
            self._update_refs(
                f"create {branch} {landed}\n",
                fix=f"the branch {short_ref(branch)} already exists with other content: "
                "merge or delete it (git branch -D), then apply again",
            )
        return ApplyResult(
            summary=f"branch {short_ref(branch)} at {landed[:12]}: {len(changes)} "
            f"change{'' if len(changes) == 1 else 's'} on top "
            f"of {self._base[:12]}; review and merge it with `git merge {short_ref(branch)}`",
            changes=changes,
        )

    def discard(self) -> None:
        """Remove the worktree and the sandbox's refs; the apply branch, if any, stays."""
        if self._discarded:
            return
        self._release()
        if self._spots is not None:
            self._spots.discard()
        git = self._repository.git
        removed = git.call("worktree", "remove", "--force", "--", str(self._workdir))
        if removed.returncode != 0:
            # Already deleted by hand, locked by a populated submodule, or its .git file was
            # rewritten: delete the folder ourselves and let git forget it.
            if self._workdir.exists():
                shutil.rmtree(self._workdir)
            git.run("worktree", "prune", fix=FSCK)
        listed = git.run(
            "for-each-ref",
            "--format=%(refname)",
            self._names.checkpoints,
            self._names.base,
            fix=FSCK,
        )
        refs = [check_ref_name(ref) for ref in listed.decode().splitlines()]
        git.run(
            "update-ref",
            "--stdin",
            stdin=deletions([*refs, self._names.branch]).encode(),
            fix=FSCK,
        )
        self._discarded = True

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

    def _tree_changes(self, tree: str) -> list[Change]:
        args = ("diff-tree", "-r", "-z", "--no-renames", "--name-status", "--no-ext-diff")
        return parse_changes(self._git.run(*args, self._names.base, tree, "--", fix=FSCK))


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
