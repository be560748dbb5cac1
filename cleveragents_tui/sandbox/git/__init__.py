"""The ``git_worktree`` sandbox strategy (ADR-035, DESIGN.md sections 5 and 8).

The sandbox is a linked worktree of the user's repository (``resource.location``) placed at
``<root>/worktree``, on a branch of ours, ``refs/heads/cleveragents/<plan_id>``, that starts
at the commit the user's HEAD named when the sandbox was created (the *base*). The user's
HEAD, index, branches and working tree are never written: every command that touches a
checkout runs with ``GIT_DIR``/``GIT_WORK_TREE`` pinned to the sandbox, so neither a
tampered ``.git`` file inside the sandbox nor ``GIT_*`` variables inherited from the caller
can redirect it.

Refs kept in the user's repository (all removed by :meth:`GitWorktreeSandbox.discard`,
except the apply branch, which is the deliverable):

- ``refs/heads/cleveragents/<plan_id>``: the sandbox branch, checked out in the worktree; its
  tip is the last checkpoint (or the one rolled back to).
- ``refs/cleveragents/<plan_id>/base``: the base commit.
- ``refs/cleveragents/<plan_id>/checkpoints/<sha>``: one per checkpoint, so ``git gc``
  never drops an old attempt and any two can still be diffed. Rolling back moves the branch
  but leaves these refs alone; the checkpoint commits form a tree of attempts.
- ``refs/heads/cleveragents/apply/<plan_id>``: what :meth:`GitWorktreeSandbox.apply` made.

What a checkpoint holds: its commit, every tracked and untracked file with git's mode
(executable bit, symlinks); and beside it, in ``<root>/blind-spots``, a record of what git
does not keep (:mod:`.blind_spots`): every folder (empty ones too) and ignored file
(per the ``.gitignore`` files of the moment), and every permission bit. A rollback restores
both, so the worktree is what it was, folder for folder and bit for bit. Not kept: the
contents of submodules (git keeps their commit), sockets, FIFOs and devices. An ignored
nested repository is kept as ignored files; one that is not ignored cannot be captured, so
:meth:`GitWorktreeSandbox.checkpoint` refuses it. The user's uncommitted changes at
creation time are not part of the sandbox: it starts from the base commit. Files are stored
as ``git add`` stores them, so in a repository with end-of-line conversion or clean/smudge
filters a rollback writes them back as ``git checkout`` would.

Speed: ``git add -A && git commit`` examines every file twice (add, then commit's own index
refresh), reads every folder, and runs hooks. A checkpoint here examines the files once, with
``git status`` and the untracked cache (which stats folders instead of reading them), hands
only the changed paths to ``git update-index``, writes the tree with ``write-tree``, and then
asks two long-running git processes (``hash-object --stdin-paths`` for the commit object,
``update-ref --stdin`` for one transaction moving both refs) instead of starting two more.
The sandbox's index is a split index, so each index write is small. Rollback has two
paths. From any state it is ``checkout --force -B <our branch> <checkpoint>`` (what
``reset --hard`` does, with the files examined in parallel) followed by ``clean -ffd`` (new
files would stay behind): it examines every tracked file, as only that shows edits made
since the last checkpoint. The rollback protocol takes a safety checkpoint just before it
rolls back, and passes it as ``current``: then nothing was edited since, and
``read-tree -m -u`` writes only the paths the two checkpoints differ in (see
:meth:`.rollback.RollingWorktree._roll_from`). docs/benchmarks.md has the figures. The long-running processes end with :meth:`discard`, or
when the sandbox object is garbage-collected; use one sandbox object from one thread at a time.

Every method raises :class:`SandboxError` (or :class:`UnsafeInputError` for hostile input)
with one line naming the resource and the fix; no traceback from git reaches the user.
Requires git 2.31 or later.
"""

from cleveragents_tui.sandbox.git.strategy import (
    WORKTREE_DIRNAME,
    GitWorktreeStrategy,
    clear_leftovers,
    create_sandbox,
    open_sandbox,
)
from cleveragents_tui.sandbox.git.worktree import GitWorktreeSandbox

__all__ = [
    "WORKTREE_DIRNAME",
    "GitWorktreeSandbox",
    "GitWorktreeStrategy",
    "clear_leftovers",
    "create_sandbox",
    "open_sandbox",
]
