"""Making, reopening and clearing git_worktree sandboxes (``sandbox.strategy: git_worktree``)."""

from __future__ import annotations

import shutil
from pathlib import Path

from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.base import SandboxError, start_again_fix
from cleveragents_tui.sandbox.git.blind_spots import DIRNAME, LIST_IGNORED, BlindSpots
from cleveragents_tui.sandbox.git.process import FSCK, base_env, full_sha, reason_of
from cleveragents_tui.sandbox.git.repository import (
    Names,
    Repository,
    deletions,
    short_ref,
    subject_of,
)
from cleveragents_tui.sandbox.git.worktree import GitWorktreeSandbox
from cleveragents_tui.sandbox.safety import check_ref_name

WORKTREE_DIRNAME = "worktree"


def create_sandbox(resource: Resource, plan_id: str, root: Path) -> GitWorktreeSandbox:
    """A new worktree at ``<root>/worktree`` on a new branch at the user's HEAD commit."""
    names = Names.for_plan(plan_id)
    subject = subject_of(resource, plan_id)
    repository = Repository.find(resource, subject, base_env())
    git = repository.git
    head = git.call("rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    if head.returncode != 0:
        raise SandboxError(
            f"{subject}: the repository at {repository.location} has no commits yet",
            "commit at least once before running a plan on it",
        )
    base = full_sha(head.stdout.decode().strip())
    root.mkdir(parents=True, exist_ok=True)
    workdir = root.resolve() / WORKTREE_DIRNAME
    if workdir.exists():
        raise SandboxError(
            f"{subject}: {workdir} already exists",
            "open the existing sandbox, or discard it before creating a new one",
        )
    git.run(
        "update-ref",
        "--stdin",
        stdin=f"create {names.branch} {base}\ncreate {names.base} {base}\n".encode(),
        fix=f"a sandbox for plan {plan_id} already exists in {repository.location}: "
        "open it, or discard it first",
    )
    added = git.call("worktree", "add", "--quiet", "--", str(workdir), short_ref(names.branch))
    if added.returncode != 0:
        git.call("update-ref", "--stdin", stdin=deletions([names.branch, names.base]).encode())
        raise SandboxError(
            f"{subject}: git worktree add failed ({reason_of(added.stderr, added.returncode)})",
            f"check that {root} is writable and that git is 2.31 or later",
        )
    admin_dir = repository.admin_dir(workdir)
    if admin_dir is None:
        raise SandboxError(
            f"{subject}: git did not register the worktree at {workdir}",
            "discard the sandbox and check the repository with `git worktree list`",
        )
    spots = BlindSpots.create(root.resolve() / DIRNAME, workdir)
    sandbox = GitWorktreeSandbox(resource, names, repository, workdir, admin_dir, base, base, spots)
    spots.record(base, spots.scan(sandbox._git.run(*LIST_IGNORED, fix=FSCK), None))
    return sandbox


def open_sandbox(resource: Resource, plan_id: str, root: Path) -> GitWorktreeSandbox:
    """The sandbox :func:`create_sandbox` made for the same resource, plan and root."""
    names = Names.for_plan(plan_id)
    subject = subject_of(resource, plan_id)
    repository = Repository.find(resource, subject, base_env())
    workdir = root.resolve() / WORKTREE_DIRNAME
    admin_dir = repository.admin_dir(workdir)
    if admin_dir is None or not workdir.is_dir():
        raise SandboxError(
            f"{subject}: there is no sandbox worktree at {workdir}",
            "if the plan ran with another sandbox folder, set AGENTS_SANDBOX_DIR to it and "
            "retry; if the worktree was deleted or the repository made anew, its work is "
            "gone: " + start_again_fix(plan_id),
        )
    listed = repository.git.run(
        "for-each-ref",
        "--format=%(refname) %(objectname)",
        names.branch,
        names.base,
        fix="check the repository with git fsck",
    )
    refs = {
        name: sha for name, sha in (line.split(" ", 1) for line in listed.decode().splitlines())
    }
    if names.branch not in refs or names.base not in refs:
        raise SandboxError(
            f"{subject}: the sandbox refs {names.branch} and {names.base} are incomplete",
            "discard the sandbox and run the plan again",
        )
    spots = BlindSpots.open(root.resolve() / DIRNAME, workdir)
    return GitWorktreeSandbox(
        resource,
        names,
        repository,
        workdir,
        admin_dir,
        refs[names.base],
        refs[names.branch],
        spots,
    )


def clear_leftovers(resource: Resource, plan_id: str, root: Path) -> None:
    """Remove what an interrupted :func:`create_sandbox` left (a crash between its steps): the
    worktree if git registered it, and the sandbox's refs, so it can be made again. The
    apply branch is never touched."""
    names = Names.for_plan(plan_id)
    repository = Repository.find(resource, subject_of(resource, plan_id), base_env())
    git = repository.git
    workdir = root.resolve() / WORKTREE_DIRNAME
    if repository.admin_dir(workdir) is not None:
        git.call("worktree", "remove", "--force", "--", str(workdir))
    if workdir.exists():
        shutil.rmtree(workdir)
    shutil.rmtree(root.resolve() / DIRNAME, ignore_errors=True)
    git.run("worktree", "prune", fix=FSCK)
    listed = git.run("for-each-ref", "--format=%(refname)", names.checkpoints, names.base, fix=FSCK)
    refs = [check_ref_name(ref) for ref in listed.decode().splitlines()]
    branch = git.call("rev-parse", "--verify", "--quiet", names.branch)
    if branch.returncode == 0:
        refs.append(names.branch)
    if refs:
        git.run("update-ref", "--stdin", stdin=deletions(refs).encode(), fix=FSCK)


class GitWorktreeStrategy:
    """Sandboxes git repositories as linked worktrees (``sandbox.strategy: git_worktree``)."""

    name: SandboxStrategyName = SandboxStrategyName.GIT_WORKTREE

    def create(self, resource: Resource, plan_id: str, root: Path) -> GitWorktreeSandbox:
        return create_sandbox(resource, plan_id, root)

    def open(self, resource: Resource, plan_id: str, root: Path) -> GitWorktreeSandbox:
        return open_sandbox(resource, plan_id, root)
