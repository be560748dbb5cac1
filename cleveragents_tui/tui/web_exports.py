"""Where an export goes when the app runs in a browser tab (``agents serve``).

In a terminal the app writes where its user asks: that user owns the account. In a browser
the person typing is not the server's account, so a file name is never a path on the
server: the tree is sent to the browser as a download, or — when the server was started
with ``--export-dir`` — saved in that one folder, under a plain file name that resolves
inside it (no folders, ``..``, ``~``, absolute paths or symlinks leading anywhere). The
file is written beside its name in that folder, opened without following links, and renamed
into place: a link planted at the name after the dialog's check is replaced or refused,
never written through.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from cleveragents_tui.domain.display import shorten
from cleveragents_tui.domain.errors import UserError

if TYPE_CHECKING:
    from cleveragents_tui.domain.views import PlanTree

# Set by agents serve for each tab (cleveragents_tui.web.sessions.EXPORT_DIR_ENV): the one
# folder web exports are saved in; unset, they are downloads.
EXPORT_DIR_ENV = "AGENTS_WEB_EXPORT_DIR"


def export_folder() -> Path | None:
    folder = os.environ.get(EXPORT_DIR_ENV)
    return Path(folder).resolve() if folder else None


def where_exports_go(is_web: bool) -> str:
    """The export dialog's line saying where the file will be."""
    if not is_web:
        return f"relative to {Path.cwd()}"
    folder = export_folder()
    if folder is None:
        return "sent to your browser as a download"
    return f"saved in the server's export folder {folder}"


def web_target(name: str) -> Path | None:
    """The file a browser's export writes — in the export folder — or ``None`` for a
    download. Anything but a plain file name that stays in the folder is refused."""
    plain = Path(name).name == name and name not in ("", ".", "..") and name[0] not in "~."
    if not plain:
        raise UserError(
            f"{shorten(name)} is not a plain file name: exports from the browser cannot "
            "name folders on the server",
            "type a file name such as plan.json or plan.png",
        )
    folder = export_folder()
    if folder is None:
        return None
    target = folder / name
    if target.is_symlink() or not target.resolve().is_relative_to(folder):
        raise _link_refused(name)
    return target


def _link_refused(name: str) -> UserError:
    return UserError(
        f"{shorten(name)} in the export folder is a link: exports are written only "
        "inside the export folder",
        "choose another file name",
    )


def rendered(tree: PlanTree, name: str) -> bytes:
    """The export's bytes, written in a private temporary folder (the format from the
    name's suffix) and read back: nothing of it stays on the server."""
    from cleveragents_tui.export.tree_file import export_tree  # with the screen, not before

    with tempfile.TemporaryDirectory() as folder:
        export_tree(tree, Path(folder) / name)
        return (Path(folder) / name).read_bytes()


def save_in_folder(name: str, data: bytes, *, replace: bool) -> Path:
    """Write ``data`` as ``name`` in the export folder, whatever was planted there since
    the check: a new file opened with ``O_EXCL | O_NOFOLLOW`` beside it, then renamed over
    the name (a rename replaces a link, it does not write through it). An existing name is
    replaced only when the person said so; a link there is refused."""
    folder = export_folder()
    assert folder is not None, "save_in_folder is for agents serve --export-dir"
    web_target(name)  # a plain name, once more
    directory = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    partial = f".{name}.{secrets.token_hex(4)}.partial"
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        with os.fdopen(os.open(partial, flags, 0o644, dir_fd=directory), "wb") as file:
            file.write(data)
        try:
            found = os.stat(name, dir_fd=directory, follow_symlinks=False)
        except FileNotFoundError:
            found = None
        if found is not None and stat.S_ISLNK(found.st_mode):
            raise _link_refused(name)
        if found is not None and not replace:
            raise UserError(
                f"{shorten(name)} was made in the export folder meanwhile",
                "export again to replace it, or choose another file name",
            )
        os.replace(partial, name, src_dir_fd=directory, dst_dir_fd=directory)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial, dir_fd=directory)
        os.close(directory)
    return folder / name
