"""The tree tools: move, delete (files and folders), mkdir, symlink and chmod in a sandbox.

What a plan needs beyond whole files, without ``run-command`` (which the overlay cannot
run): every change goes through the sandbox's checked file operations
(:mod:`cleveragents_tui.actors.sandbox_files`), so each is captured by the next checkpoint
of every strategy and undone exactly by a rollback — renames, empty folders, symlinks and
permission bits included (docs/tools.md says what each strategy restores and lands).
"""

from __future__ import annotations

import re

from cleveragents_tui.actors.file_tools import PATH, RESOURCE, FileTool, file_write_spec
from cleveragents_tui.actors.sandbox_files import NEW_FOLDER_MODE, FileRefused, SandboxFiles
from cleveragents_tui.actors.tool_support import Arguments, Param, ParamType

_OCTAL = re.compile(r"^(?:0o)?([0-7]{3,4})$")
MODE = Param("mode", ParamType.TEXT, "permission bits in octal, e.g. 0644, 755 or 0o600")


def parse_mode(text: str) -> int | None:
    """``"0644"``, ``"644"`` or ``"0o644"`` as an int; None for anything else."""
    match = _OCTAL.match(text.strip())
    return None if match is None else int(match.group(1), 8)


class _TreeTool(FileTool):
    """A tree tool: a file tool that may take permission bits."""

    def mode(self, arguments: Arguments, default: int | None = None) -> int:
        text = arguments.optional_text("mode")
        if text is None and default is not None:
            return default
        mode = None if text is None else parse_mode(text)
        if mode is None:
            raise FileRefused(f"mode {text!r} is not octal permission bits (e.g. 0644 or 0755)")
        return mode


class Move(_TreeTool):
    spec = file_write_spec(
        "local/move",
        "Rename or move a file, symlink or folder to a path that does not exist.",
    )
    params = (
        RESOURCE,
        Param("from", ParamType.TEXT, "the path to move (a file, symlink or folder)"),
        Param("to", ParamType.TEXT, "its new path; must not exist (parent folders are made)"),
    )

    def change(self, files: SandboxFiles, arguments: Arguments) -> str:
        source, destination = arguments.text("from"), arguments.text("to")
        kind = files.move(source, destination)
        return f"moved {kind} {source} to {destination}"


class Delete(_TreeTool):
    spec = file_write_spec(
        "local/delete",
        "Delete a file, a symlink (not its target) or a folder with everything in it.",
    )
    params = (RESOURCE, PATH)

    def change(self, files: SandboxFiles, arguments: Arguments) -> str:
        path = arguments.text("path")
        kind = files.remove(path)
        return f"deleted {kind} {path}"


class MakeDir(_TreeTool):
    spec = file_write_spec(
        "local/mkdir",
        "Create a folder (and missing parents); an existing folder is left as is.",
    )
    params = (
        RESOURCE,
        PATH,
        Param(
            "mode",
            ParamType.TEXT,
            f"permission bits in octal (default {NEW_FOLDER_MODE:04o}); at least 0700",
            required=False,
        ),
    )

    def change(self, files: SandboxFiles, arguments: Arguments) -> str:
        path, mode = arguments.text("path"), self.mode(arguments, NEW_FOLDER_MODE)
        if files.make_dir(path, mode):
            return f"created folder {path} (mode {mode:04o})"
        return f"{path} is already a folder; nothing changed"


class Symlink(_TreeTool):
    spec = file_write_spec(
        "local/symlink",
        "Create a symlink whose relative target stays inside the resource.",
    )
    params = (
        RESOURCE,
        Param("path", ParamType.TEXT, "where the link is made; must not exist"),
        Param(
            "target",
            ParamType.TEXT,
            "what it points to, relative to the link's folder ('../' only at the start, "
            "never above the resource); it need not exist",
        ),
    )

    def change(self, files: SandboxFiles, arguments: Arguments) -> str:
        path, target = arguments.text("path"), arguments.text("target")
        files.symlink(path, target)
        return f"linked {path} -> {target}"


class Chmod(_TreeTool):
    spec = file_write_spec(
        "local/chmod",
        "Set the permission bits of a file or folder.",
    )
    params = (RESOURCE, PATH, MODE)

    def change(self, files: SandboxFiles, arguments: Arguments) -> str:
        path, mode = arguments.text("path"), self.mode(arguments)
        kind = files.chmod(path, mode)
        return f"set mode {mode:04o} on {kind} {path}"


__all__ = ["Chmod", "Delete", "MakeDir", "Move", "Symlink", "parse_mode"]
