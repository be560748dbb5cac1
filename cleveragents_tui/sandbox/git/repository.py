"""The user's repository and the refs one plan's sandbox keeps in it (see
:mod:`cleveragents_tui.sandbox.git` for the layout)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.base import Change, ChangeKind, SandboxError
from cleveragents_tui.sandbox.git.process import BATCH_HEADER, FSCK, Git, full_sha, reason_of
from cleveragents_tui.sandbox.safety import UnsafeInputError, check_ref_name

_CHANGE_KINDS = {
    "A": ChangeKind.ADDED,
    "D": ChangeKind.DELETED,
    "M": ChangeKind.MODIFIED,
    "T": ChangeKind.MODIFIED,
}


@dataclass(frozen=True, slots=True)
class Names:
    """The refs of one plan's sandbox, each checked by ``check_ref_name`` once, here."""

    plan_id: str
    branch: str
    base: str
    checkpoints: str
    apply_branch: str

    @classmethod
    def for_plan(cls, plan_id: str) -> Names:
        if not plan_id.isprintable() or "/" in plan_id or plan_id in ("", "apply"):
            raise UnsafeInputError(f"plan id {plan_id!r} cannot name a git branch", "use a ULID")
        check_ref_name(f"refs/cleveragents/{plan_id}")
        return cls(
            plan_id=plan_id,
            branch=check_ref_name(f"refs/heads/cleveragents/{plan_id}"),
            base=check_ref_name(f"refs/cleveragents/{plan_id}/base"),
            checkpoints=check_ref_name(f"refs/cleveragents/{plan_id}/checkpoints") + "/",
            apply_branch=check_ref_name(f"refs/heads/cleveragents/apply/{plan_id}"),
        )

    def checkpoint(self, sha: str) -> str:
        return check_ref_name(self.checkpoints + full_sha(sha))


def short_ref(ref: str) -> str:
    return ref.removeprefix("refs/heads/")


def parse_changes(raw: bytes) -> list[Change]:
    """``--name-status -z`` output (``X\\0path\\0`` pairs, no renames) as sorted Changes."""
    fields = raw.split(b"\0")
    changes = [
        Change(
            path=os.fsdecode(path), kind=_CHANGE_KINDS.get(status.decode()[:1], ChangeKind.MODIFIED)
        )
        for status, path in zip(fields[0:-1:2], fields[1::2], strict=True)
    ]
    return sorted(changes, key=lambda change: change.path)


@dataclass(frozen=True, slots=True)
class Repository:
    """The user's repository as found from ``resource.location`` (never via inherited env)."""

    location: Path
    common_dir: Path
    git: Git

    @classmethod
    def find(cls, resource: Resource, subject: str, env: Mapping[str, str]) -> Repository:
        location = Path(resource.location).expanduser()
        fix = f"set the location of {resource.resource_id} to the folder of a git repository"
        if not location.is_dir():
            raise SandboxError(f"{subject}: {location} is not a folder", fix)
        git = Git(location.resolve(), env, subject)
        done = git.call("rev-parse", "--path-format=absolute", "--git-common-dir", "--show-prefix")
        if done.returncode != 0:
            reason = reason_of(done.stderr, done.returncode)
            raise SandboxError(
                f"{subject}: {location} is not a usable git repository ({reason})", fix
            )
        common_dir, prefix = (os.fsdecode(line) for line in done.stdout.split(b"\n")[:2])
        if prefix:
            # A worktree always holds the whole repository; a sandbox of a subfolder would
            # checkpoint, roll back and apply more than the resource names.
            raise SandboxError(
                f"{subject}: {location} is the subfolder {prefix!r} of a git repository",
                f"set the location of {resource.resource_id} to the repository's top folder",
            )
        return cls(location=git.cwd, common_dir=Path(common_dir), git=git)

    def admin_dir(self, workdir: Path) -> Path | None:
        """git's administrative folder for the worktree at ``workdir`` (gitrepository-layout:
        ``worktrees/<id>/gitdir`` holds the path of the worktree's ``.git`` file). Found from
        the repository side so a rewritten ``.git`` file in the sandbox cannot mislead us."""
        wanted = (workdir / ".git").resolve()
        for gitdir in sorted((self.common_dir / "worktrees").glob("*/gitdir")):
            try:
                recorded = Path(gitdir.read_text("utf-8").strip()).resolve()
            except (OSError, UnicodeDecodeError):
                continue
            if recorded == wanted:
                return gitdir.parent
        return None


def subject_of(resource: Resource, plan_id: str) -> str:
    return f"git_worktree sandbox of {resource.resource_id} (plan {plan_id})"


def deletions(refs: list[str]) -> str:
    return "".join(f"delete {check_ref_name(ref)}\n" for ref in refs)


def branch_exists(git: Git, branch: str) -> bool:
    """Whether ``branch`` (a full ref name) names a commit in the repository."""
    return git.call("rev-parse", "--verify", "--quiet", branch).returncode == 0


def existing_apply(git: Git, branch: str, tree: str, base: str) -> str | None:
    """The commit of an earlier apply of ``tree`` onto ``base`` on ``branch``, so a retried
    apply is a no-op."""
    out = git.run("cat-file", "--batch", stdin=f"{branch}\n".encode(), fix=FSCK)
    header, _, body = out.partition(b"\n")
    found = BATCH_HEADER.match(header)
    if found is None or found[1] != b"commit":
        return None
    lines = body.partition(b"\n\n")[0].decode().splitlines()
    parents = [line for line in lines if line.startswith("parent ")]
    if lines[:1] != [f"tree {tree}"] or parents != [f"parent {base}"]:
        return None
    return header.split()[0].decode()


def blob_listed(git: Git, name: str, relative: str, verify: Callable[[], None]) -> bytes | None:
    """The content of ``relative`` in commit ``name`` for a path with a line break (which
    ``cat-file --batch`` cannot take): its blob from ``ls-tree -z``, which takes the path as
    it is, no pattern. None if it is absent, a folder or a submodule; if git fails, ``verify``
    raises what is missing, else a SandboxError says the checkpoint cannot be read."""
    done = git.call("ls-tree", "-z", "--full-tree", name, "--", relative)
    if done.returncode != 0:
        verify()
        raise SandboxError(f"{git.subject}: cannot read checkpoint {name}", FSCK)
    meta, _, _ = done.stdout.partition(b"\t")
    fields = meta.split()
    if len(fields) != 3 or fields[1] != b"blob":
        return None
    return git.run("cat-file", "blob", fields[2].decode(), fix=FSCK)
