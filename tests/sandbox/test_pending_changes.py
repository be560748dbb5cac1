"""``pending_changes`` (``agents plan apply --dry-run``): what ``apply`` then lands, read
without writing a byte of the sandbox folder or the real resource."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cleveragents_tui.domain.ids import new_ulid
from cleveragents_tui.sandbox.base import ChecksApply, PreviewsApply, SandboxError
from cleveragents_tui.sandbox.filesystem_copy import FilesystemCopySandbox
from cleveragents_tui.sandbox.git import GitWorktreeSandbox
from cleveragents_tui.sandbox.overlay import OverlayStrategy
from tests.sandbox.test_filesystem_copy import (  # noqa: F401
    build_tree,
    mess_up,
    plan_id,
    real,
    sandbox,
)
from tests.sandbox.test_git_worktree import (  # noqa: F401
    PLAN,
    git,
    isolated_git,
    repo,
    resource,
    root,
    scribble,
    user,
)
from tests.sandbox.test_git_worktree import sandbox as git_sandbox  # noqa: F401
from tests.sandbox.test_overlay import overlay_resource


def files(folder: Path) -> dict[str, str]:
    """Every path under ``folder``: a file's sha256, a link's target, a folder's mode."""
    out = {}
    for path in sorted(folder.rglob("*")):
        name = path.relative_to(folder).as_posix()
        if path.is_symlink():
            out[name] = "-> " + os.readlink(path)
        elif path.is_dir():
            out[name] = f"dir {path.stat().st_mode:o}"
        else:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            out[name] = f"{path.stat().st_mode:o} {digest}"
    return out


def test_filesystem_copy_lists_what_apply_lands_and_writes_nothing(
    sandbox: FilesystemCopySandbox,  # noqa: F811
    tmp_path: Path,
) -> None:
    assert isinstance(sandbox, PreviewsApply)
    sandbox.checkpoint()  # a stat cache, which the dry run must neither use wrongly nor rewrite
    work = sandbox.workdir
    mess_up(work)
    (work / "src" / "pkg" / "__init__.py").write_bytes(b"")  # rewritten, the same: not listed
    cfg = work / "src" / "pkg" / "readonly.cfg"  # rewritten, same size and mtime: listed
    st = cfg.stat()
    cfg.chmod(0o644)
    cfg.write_text("fixeD\n")
    os.utime(cfg, ns=(st.st_atime_ns, st.st_mtime_ns))
    cfg.chmod(0o444)
    before = files(tmp_path)
    pending = sandbox.pending_changes()
    assert files(tmp_path) == before
    listed = [c.path for c in pending]
    assert "src/pkg/readonly.cfg" in listed and "src/pkg/__init__.py" not in listed
    assert pending == list(sandbox.apply().changes)


def test_git_worktree_lists_what_apply_lands_and_writes_nothing(
    git_sandbox: GitWorktreeSandbox,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Nothing in the repository either: no index, no object, no ref."""
    assert isinstance(git_sandbox, PreviewsApply)
    scribble(git_sandbox.workdir)
    before = files(tmp_path)
    pending = git_sandbox.pending_changes()
    assert files(tmp_path) == before
    assert pending
    assert pending == list(git_sandbox.apply().changes)


def test_git_worktree_lists_edits_made_in_the_tick_the_index_was_written(
    git_sandbox: GitWorktreeSandbox,  # noqa: F811
) -> None:
    """Same-size edits whose mtime equals the index's ("racily clean" to git): a machine
    with a coarse clock writes them so. The dry run still lists what Apply lands."""
    work = git_sandbox.workdir
    admin = Path(git(work, "rev-parse", "--absolute-git-dir").strip())
    tick = 1_700_000_000_000_000_000

    def stamp(paths: Iterator[Path]) -> None:
        for path in paths:
            if not path.is_symlink():
                os.utime(path, ns=(tick, tick))

    stamp(work.rglob("*"))
    git(work, "-c", "core.splitIndex=false", "update-index", "--refresh")  # caches the tick
    stamp(admin.iterdir())  # the index written in that same tick
    scribble(work)  # same-size rewrites among its edits
    stamp(work.rglob("*"))
    pending = git_sandbox.pending_changes()
    assert {"src/pkg/mod.py", "assets/logo.bin"} <= {c.path for c in pending}
    assert pending == list(git_sandbox.apply().changes)


def _refusal_then_apply(box: ChecksApply, apply: Callable[[], object], tmp_path: Path) -> str:
    """The dry run's refusal, read without writing a byte, then Apply's own: the same."""
    before = files(tmp_path)
    refusal = box.apply_refusal()
    assert files(tmp_path) == before
    assert refusal is not None
    with pytest.raises(SandboxError) as refused:
        apply()
    assert str(refused.value) == str(refusal)
    return refusal.problem


def test_filesystem_copy_refuses_as_apply_then_does(
    sandbox: FilesystemCopySandbox,  # noqa: F811
    real: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A real file the plan changes, edited meanwhile: refused, naming only it; a real file
    the plan leaves alone and one already holding the plan's content are no conflict."""
    assert isinstance(sandbox, ChecksApply)
    work = sandbox.workdir
    mess_up(work)
    (real / "README.md").write_text("edited by hand\n")  # the plan changes it too
    (real / "new.txt").write_text("new\n")  # what the plan adds there, the same bytes
    (real / "Makefile").write_text("not the plan's\n")  # the plan leaves it alone
    problem = _refusal_then_apply(sandbox, sandbox.apply, tmp_path)
    assert problem.endswith("since the sandbox was made: README.md")
    (real / "README.md").write_text("changed\n")  # now what the plan writes
    assert sandbox.apply_refusal() is None
    assert sandbox.apply().changes


def test_overlay_refuses_as_apply_then_does(tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    build_tree(folder)
    box = OverlayStrategy(durable=False).create(
        overlay_resource(folder), new_ulid(), tmp_path / "sandboxes"
    )
    assert isinstance(box, ChecksApply)
    box.write_bytes("README.md", b"changed\n")
    box.write_bytes("added.txt", b"mine\n")
    (folder / "README.md").write_text("edited by hand\n")
    (folder / "Makefile").write_text("not the plan's\n")
    assert _refusal_then_apply(box, box.apply, tmp_path).endswith(": README.md")
    (folder / "README.md").write_bytes(b"changed\n")
    assert box.apply_refusal() is None
    box.apply()
    assert (folder / "added.txt").read_bytes() == b"mine\n"
    assert (folder / "Makefile").read_text() == "not the plan's\n"


def test_git_worktree_refuses_a_taken_apply_branch_as_apply_then_does(
    git_sandbox: GitWorktreeSandbox,  # noqa: F811
    repo: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The apply branch made by someone else: refused, reading only (the tree Apply would
    commit is written to a scratch folder). Apply's own branch, retried, is no refusal; its
    content changed since (the plan went on), it is again."""
    assert isinstance(git_sandbox, ChecksApply)
    branch = f"cleveragents/apply/{PLAN}"
    assert git_sandbox.apply_refusal() is None  # no branch yet
    git(repo, "branch", branch)
    assert git_sandbox.apply_refusal() is None  # nothing to apply: Apply makes no branch
    scribble(git_sandbox.workdir)
    before = files(tmp_path)
    refusal = git_sandbox.apply_refusal()
    assert files(tmp_path) == before
    assert refusal is not None
    assert refusal.problem.endswith(f"the branch {branch} already exists with other content")
    with pytest.raises(SandboxError) as refused:
        git_sandbox.apply()
    assert refusal.fix is not None and refusal.fix in str(refused.value)
    git(repo, "branch", "-D", branch)
    assert git_sandbox.apply_refusal() is None
    git_sandbox.apply()
    assert git_sandbox.apply_refusal() is None  # the same commit: a retry lands as it did
    (git_sandbox.workdir / "later.txt").write_text("later\n")
    assert git_sandbox.apply_refusal() is not None
