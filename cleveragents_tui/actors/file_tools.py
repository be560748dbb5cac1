"""The file tools: read, write, edit and delete one file of a sandbox.

``local/write-file`` takes text (UTF-8) or, with ``encoding: base64``, any bytes. The tools
that change the tree itself (move, delete folders, mkdir, symlink, chmod) are in
:mod:`cleveragents_tui.actors.tree_tools`.

They work on any resource with files: a workdir sandbox (git_worktree, filesystem_copy, or
a ``none`` resource that is a directory) or an overlay sandbox; the path rules are those of
:mod:`cleveragents_tui.actors.sandbox_files`.
"""

from __future__ import annotations

import base64
import binascii

from cleveragents_tui.actors.base import ToolContext, ToolOutcome
from cleveragents_tui.actors.sandbox_files import FileRefused, Kind, Listed, SandboxFiles, files_of
from cleveragents_tui.actors.tool_support import (
    OUTPUT_LIMIT,
    Arguments,
    BuiltinTool,
    Param,
    ParamType,
    open_sandbox,
    refused,
    strategy_of,
    truncate_text,
)
from cleveragents_tui.domain.display import printable
from cleveragents_tui.domain.tool import ToolCategory, ToolSpec

EDIT_LIMIT = 8 * 1024 * 1024  # bytes: larger files are rewritten with local/write-file

RESOURCE = Param("resource", ParamType.TEXT, "the resource id (namespace/name) of the plan")
PATH = Param("path", ParamType.TEXT, "a relative path inside the resource, '/' separated")


def file_write_spec(name: str, description: str) -> ToolSpec:
    """A write tool on a resource's files, checkpointed like every file change."""
    return ToolSpec(
        name=name,
        category=ToolCategory.WRITE,
        description=description,
        writes=True,
        side_effects=("writes:files",),
    )


class FileCall:
    """The sandbox files of one call, and whether the call changed anything."""

    def __init__(self, context: ToolContext, resource_id: str) -> None:
        self.context = context
        self.resource_id = resource_id
        self.changed = False
        sandbox = open_sandbox(context, resource_id)
        self.strategy = strategy_of(sandbox)
        self.files: SandboxFiles | None = files_of(sandbox, self._note)

    def _note(self) -> None:
        if not self.changed:
            self.changed = True
            self.context.sandboxes.note_write(self.resource_id)

    def no_files(self, tool: str) -> ToolOutcome:
        return refused(
            f"{tool}: resource {self.resource_id} (strategy {self.strategy}) has no files; "
            "use local/run-sql for databases"
        )

    def outcome(self, ok: bool, output: str) -> ToolOutcome:
        writes = (self.resource_id,) if self.changed else ()
        if not ok:
            output = " ".join(output.split())
        return ToolOutcome(ok=ok, output=output, writes=writes)


class FileTool(BuiltinTool):
    """A tool on one resource's files: the call's files, a refusal as one line, the write
    reported if any. Subclasses say what ``change`` does."""

    def perform(self, context: ToolContext, arguments: Arguments) -> ToolOutcome:
        call = FileCall(context, arguments.text("resource"))
        files = call.files
        if files is None:
            return call.no_files(self.spec.name)
        try:
            return call.outcome(True, self.change(files, arguments))
        except FileRefused as exc:
            return call.outcome(False, f"{self.spec.name}: {exc}")

    def change(self, files: SandboxFiles, arguments: Arguments) -> str:
        """Read or change through ``files``; the output line. Raises FileRefused."""
        raise NotImplementedError


def _utf8(text: str) -> bytes | None:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return None


class ReadFile(FileTool):
    spec = ToolSpec(
        name="local/read-file",
        category=ToolCategory.READ,
        description="Read a text file of a resource (UTF-8; at most 64 KiB shown).",
        # what it read is what the actor decided on next: a revert that rolls the file
        # back reads it again (as a test run runs again), so a model sees the new content
        side_effects=("reads:files",),
    )
    params = (RESOURCE, PATH)

    def change(self, files: SandboxFiles, arguments: Arguments) -> str:
        data, total = files.read(arguments.text("path"), OUTPUT_LIMIT)
        text, binary = truncate_text(data, total)
        if binary:
            text = (
                f"[binary file: {total} bytes, shown as UTF-8 with invalid bytes replaced]\n" + text
            )
        return text


LISTED = 400  # entries a listing shows; a larger tree is listed by folder
FOLDER = Param(
    "path",
    ParamType.TEXT,
    "a folder inside the resource, '/' separated; omitted: the whole resource",
    required=False,
)


def folder_of(arguments: Arguments) -> str | None:
    """The folder ``path`` names; None (the whole resource) when omitted, empty or ``.``."""
    path = arguments.optional_text("path")
    return None if path is None or path.strip() in ("", ".", "./") else path


class ListFiles(FileTool):
    spec = ToolSpec(
        name="local/list-files",
        category=ToolCategory.READ,
        description=f"List the files and folders of a resource, or of one folder in it (git's "
        f"metadata left out; at most {LISTED} entries, the top levels first).",
        side_effects=("reads:files",),  # what it listed is what the actor decided on next
    )
    params = (RESOURCE, FOLDER)

    def change(self, files: SandboxFiles, arguments: Arguments) -> str:
        folder = folder_of(arguments)
        entries, more = files.listing(folder, LISTED)
        where = f"under {folder}" if folder else "in the resource"
        lines = [f"{len(entries)} entries {where} (folders end with /):"]
        lines += [_listed(e) for e in entries]
        if more:
            lines.append("… more not listed: list a folder (path) to see the rest of it")
        return "\n".join(lines)


def _listed(entry: Listed) -> str:
    name = printable(entry.path, one_line=True)  # a name with a line break stays one line
    if entry.kind is Kind.FILE:
        return f"{name}  {entry.size} bytes"
    if entry.kind is Kind.DIRECTORY:
        return f"{name}/"
    return f"{name}  ({entry.kind})"


def _base64(text: str) -> bytes | None:
    """Standard base64 (RFC 4648, padded), line breaks allowed; None when it is not."""
    try:
        return base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError):
        return None


ENCODINGS = ("utf-8", "base64")


class WriteFile(BuiltinTool):
    spec = file_write_spec(
        "local/write-file",
        "Write a whole file (UTF-8 text, or any bytes as base64), creating parent folders.",
    )
    params = (
        RESOURCE,
        PATH,
        Param("content", ParamType.TEXT, "the complete new content", empty_ok=True),
        Param(
            "encoding",
            ParamType.TEXT,
            "how content is given: utf-8 (text, the default) or base64 (any bytes)",
            required=False,
        ),
        Param(
            "executable",
            ParamType.BOOL,
            "true: mode 0755, false: mode 0644; omitted: an existing file keeps its mode",
            required=False,
        ),
    )

    def perform(self, context: ToolContext, arguments: Arguments) -> ToolOutcome:
        call = FileCall(context, arguments.text("resource"))
        if call.files is None:
            return call.no_files(self.spec.name)
        path = arguments.text("path")
        encoding = arguments.optional_text("encoding") or "utf-8"
        if encoding not in ENCODINGS:
            return refused(
                f"{self.spec.name}: encoding {encoding!r} is not known; use utf-8 or base64"
            )
        if encoding == "base64":
            data = _base64(arguments.text("content"))
            if data is None:
                return refused(
                    f"{self.spec.name}: content is not valid base64 (RFC 4648 alphabet, "
                    "with its = padding); nothing was written"
                )
        else:
            data = _utf8(arguments.text("content"))
            if data is None:
                return refused(f"{self.spec.name}: content is not valid Unicode (a lone surrogate)")
        executable = arguments.flag("executable")
        mode = None if executable is None else 0o755 if executable else 0o644
        try:
            created = call.files.write(path, data, mode)
        except FileRefused as exc:
            return call.outcome(False, f"{self.spec.name}: {exc}")
        verb = "created" if created else "wrote"
        suffix = "" if mode is None else f" (mode {mode:04o})"
        return call.outcome(True, f"{verb} {path}: {len(data)} bytes{suffix}")


class EditFile(BuiltinTool):
    spec = file_write_spec(
        "local/edit-file",
        "Replace exactly one occurrence of a text in a UTF-8 file (done already "
        "when the old text is gone and the new one is there once).",
    )
    params = (
        RESOURCE,
        PATH,
        Param("old", ParamType.TEXT, "the text to replace; it must occur exactly once"),
        Param("new", ParamType.TEXT, "the replacement text", empty_ok=True),
    )

    def perform(self, context: ToolContext, arguments: Arguments) -> ToolOutcome:
        call = FileCall(context, arguments.text("resource"))
        if call.files is None:
            return call.no_files(self.spec.name)
        name, path = self.spec.name, arguments.text("path")
        old, new = arguments.text("old"), arguments.text("new")
        try:
            data, total = call.files.read(path, EDIT_LIMIT + 1)
            if total > EDIT_LIMIT:
                return call.outcome(
                    False, f"{name}: {path} is larger than {EDIT_LIMIT} bytes; use local/write-file"
                )
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                return call.outcome(False, f"{name}: {path} is not UTF-8 text; nothing changed")
            count = text.count(old)
            if count == 0 and new and text.count(new) == 1:
                # Already made: a retry after a crash between the write and its record, or
                # corrective work (an append) on a state that has the same edit.
                return call.outcome(True, f"{path} already has the new text; nothing changed")
            if count != 1:
                found = "not found" if count == 0 else f"found {count} times"
                return call.outcome(
                    False,
                    f"{name}: the old text was {found} in {path}; nothing changed "
                    "(give a text that occurs exactly once, with more context if needed)",
                )
            start = text.index(old)
            updated = text[:start] + new + text[start + len(old) :]
            encoded = _utf8(updated)
            if encoded is None:
                return call.outcome(False, f"{name}: the new text is not valid Unicode")
            call.files.write(path, encoded, None)
        except FileRefused as exc:
            return call.outcome(False, f"{name}: {exc}")
        line = text.count("\n", 0, start) + 1
        return call.outcome(True, f"edited {path}: replaced 1 occurrence at line {line}")


class DeleteFile(FileTool):
    spec = file_write_spec(
        "local/delete-file",
        "Delete one file or symlink (never a folder).",
    )
    params = (RESOURCE, PATH)

    def change(self, files: SandboxFiles, arguments: Arguments) -> str:
        path = arguments.text("path")
        files.delete(path)
        return f"deleted {path}"


__all__ = ["DeleteFile", "EditFile", "Kind", "ReadFile", "WriteFile"]
