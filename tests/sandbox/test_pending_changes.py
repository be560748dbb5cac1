"""``pending_changes`` (``agents plan apply --dry-run``): what ``apply`` then lands, read
without writing a byte of the sandbox folder or the real resource."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from cleveragents_tui.sandbox.base import PreviewsApply
from cleveragents_tui.sandbox.filesystem_copy import FilesystemCopySandbox
from cleveragents_tui.sandbox.git import GitWorktreeSandbox
from tests.sandbox.test_filesystem_copy import mess_up, plan_id, real, sandbox  # noqa: F401
from tests.sandbox.test_git_worktree import (  # noqa: F401
    isolated_git,
    repo,
    resource,
    root,
    scribble,
    user,
)
from tests.sandbox.test_git_worktree import sandbox as git_sandbox  # noqa: F401


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
