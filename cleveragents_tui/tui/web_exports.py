"""Where an export goes when the app runs in a browser tab (``agents serve``).

In a terminal the app writes where its user asks: that user owns the account. In a browser
the person typing is not the server's account, so a file name is never a path on the
server: the tree is sent to the browser as a download, or — when the server was started
with ``--export-dir`` — saved in that one folder, under a plain file name that resolves
inside it (no folders, ``..``, ``~``, absolute paths or symlinks leading anywhere).
"""

from __future__ import annotations

import os
from pathlib import Path

from cleveragents_tui.domain.display import shorten
from cleveragents_tui.domain.errors import UserError

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
        raise UserError(
            f"{shorten(name)} in the export folder is a link: exports are written only "
            "inside the export folder",
            "choose another file name",
        )
    return target
