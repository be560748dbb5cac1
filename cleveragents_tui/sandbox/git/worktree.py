"""The git_worktree sandbox: one plan's linked worktree of one git repository (layout,
checkpoints and the two rollback paths: :mod:`cleveragents_tui.sandbox.git`).

Here: reading checkpoints, Apply and discard, on the layers below (:mod:`.checkout`,
:mod:`.checkpoints`, :mod:`.rollback`)."""

from __future__ import annotations

import os
import shlex
import shutil

from cleveragents_tui.sandbox.base import ApplyResult, Change, NothingLandedError, SandboxError
from cleveragents_tui.sandbox.git.preview import pending_changes, pending_tree
from cleveragents_tui.sandbox.git.process import BATCH_HEADER, FSCK, full_sha, reason_of
from cleveragents_tui.sandbox.git.repository import (
    blob_listed,
    branch_exists,
    deletions,
    existing_apply,
    parse_changes,
    short_ref,
)
from cleveragents_tui.sandbox.git.rollback import RollingWorktree
from cleveragents_tui.sandbox.git.staging import stage
from cleveragents_tui.sandbox.safety import check_ref_name, safe_relative_path


class GitWorktreeSandbox(RollingWorktree):
    """One plan's worktree of one git repository; see the module docstring for the layout.

    Made by :meth:`GitWorktreeStrategy.create` and reopened by
    :meth:`GitWorktreeStrategy.open`. Checkpoint references are full
    commit SHAs; :attr:`base` (the commit the sandbox started from) is accepted wherever a
    checkpoint is, so the engine can roll a resource back to its baseline.
    """

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

    def apply_refusal(self) -> SandboxError | None:
        """Apply's refusal, read only (a dry run): its branch is there already with other
        content (another commit, or the plan's changes made again since). The user's
        checkout moving is no refusal: Apply commits onto the base, not onto HEAD."""
        self._ensure_live()
        branch = self._names.apply_branch
        if not branch_exists(self._git, branch):
            return None
        tree = pending_tree(self._git, self._admin_dir, self._workdir)
        unchanged = self._git.run("rev-parse", f"{self._base}^{{tree}}", fix=FSCK)
        if tree == unchanged.decode().strip():
            return None  # nothing to apply: Apply makes no branch
        if existing_apply(self._git, branch, tree, self._base) is not None:
            return None  # an Apply that landed it, retried: the same commit
        return self._branch_taken()

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
            if branch_exists(self._git, branch):
                raise self._branch_taken()  # before a commit object is written
            message = (
                f"Apply cleveragents plan {self._names.plan_id}\n\n"
                f"{len(changes)} changes made in the sandbox of {self._resource.resource_id}.\n"
            )
            landed = self._commit(tree, self._base, message)
            taken = self._branch_taken().fix  # made since the check above: refused all the same
            self._update_refs(
                f"create {branch} {landed}\n",
                fix=f"the branch {short_ref(branch)} already exists with other content: {taken}",
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

    def _branch_taken(self) -> NothingLandedError:
        """Apply's refusal when its branch exists with other content: what it holds is
        someone's, so the fix names the command that deletes it, quoted to be pasted."""
        branch = short_ref(self._names.apply_branch)
        delete = (
            f"git -C {shlex.quote(str(self._repository.location))} branch -D {shlex.quote(branch)}"
        )
        return NothingLandedError(
            f"{self._git.subject}: the branch {branch} already exists with other content",
            f"merge what you need from it, delete it ({delete}), then apply again",
        )

    def _tree_changes(self, tree: str) -> list[Change]:
        args = ("diff-tree", "-r", "-z", "--no-renames", "--name-status", "--no-ext-diff")
        return parse_changes(self._git.run(*args, self._names.base, tree, "--", fix=FSCK))
