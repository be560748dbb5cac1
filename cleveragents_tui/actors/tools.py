"""The tool registry: tools by name, and their specs for pre-flight (a ``ToolCatalog``).

:func:`default_registry` holds the built-in tools (docs/tools.md describes them).
"""

from __future__ import annotations

from collections.abc import Iterable

from cleveragents_tui.actors.base import Tool
from cleveragents_tui.actors.tool_support import BadArguments, BuiltinTool, check_arguments
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.tool import ToolSpec


class UnknownToolError(UserError):
    """A tool name that is not registered; the message lists the registered names."""


class DuplicateToolError(UserError):
    """A second tool registered under a name already taken."""


class ToolRegistry:
    """Registered tools by name. ``get`` returns the spec (or None), as pre-flight expects."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        name = tool.spec.name
        if name in self._tools:
            raise DuplicateToolError(
                f"tool {name} is already registered", "give the new tool another name"
            )
        self._tools[name] = tool

    def get(self, name: str) -> ToolSpec | None:
        tool = self._tools.get(name)
        return None if tool is None else tool.spec

    def tool(self, name: str) -> Tool:
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(self.names()) or "none"
            raise UnknownToolError(f"tool {name!r} is not registered", f"use one of: {known}")
        return tool

    def argument_problem(self, name: str, arguments: object) -> str | None:
        """Why a call of ``name`` with ``arguments`` would be refused before it runs (an
        unknown or missing argument, a value of the wrong type), found without running it:
        ``agents action validate`` reports it instead of the plan failing at Execute. None
        when they fit, or when the tool does not declare its parameters."""
        tool = self._tools.get(name)
        if not isinstance(tool, BuiltinTool):
            return None
        try:
            check_arguments(arguments, tool.params)
        except BadArguments as exc:
            return str(exc)
        return None

    def specs(self) -> list[ToolSpec]:
        return [self._tools[name].spec for name in self.names()]

    def names(self) -> list[str]:
        return sorted(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)


def default_registry() -> ToolRegistry:
    """A new registry holding the built-in ``local/...`` tools."""
    from cleveragents_tui.actors.command_tools import RunCommand, RunTests
    from cleveragents_tui.actors.file_tools import (
        DeleteFile,
        EditFile,
        ListFiles,
        ReadFile,
        WriteFile,
    )
    from cleveragents_tui.actors.notify_tool import Notify
    from cleveragents_tui.actors.search_tool import SearchFiles
    from cleveragents_tui.actors.sql_tool import QuerySql, RunSql
    from cleveragents_tui.actors.tree_tools import Chmod, Delete, MakeDir, Move, Symlink

    return ToolRegistry(
        [
            ReadFile(),
            ListFiles(),
            SearchFiles(),
            WriteFile(),
            EditFile(),
            DeleteFile(),
            Delete(),
            Move(),
            MakeDir(),
            Symlink(),
            Chmod(),
            RunCommand(),
            RunSql(),
            QuerySql(),
            Notify(),
            RunTests(),
        ]
    )
