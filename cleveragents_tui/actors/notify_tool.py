"""``local/notify``: send a notification, which in this project means an outbox line.

Nothing leaves the machine: the notification is appended as one JSON line
``{"time", "channel", "message"}`` to ``outbox.jsonl`` in the directory of a resource whose
sandbox strategy is ``none`` (a real, unsandboxed resource: the effect cannot be rolled
back, which is why the tool is declared irreversible). Other strategies are refused.
"""

from __future__ import annotations

import json
import os
from typing import Final

from cleveragents_tui.actors.base import ToolContext, ToolOutcome
from cleveragents_tui.actors.tool_support import (
    Arguments,
    BuiltinTool,
    Param,
    ParamType,
    changed,
    open_sandbox,
    refused,
    strategy_of,
)
from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.domain.tool import ToolCategory, ToolSpec
from cleveragents_tui.sandbox.safety import resolve_inside

OUTBOX: Final = "outbox.jsonl"
MAX_CHANNEL: Final = 200
MAX_MESSAGE: Final = 64 * 1024
_FLAGS: Final = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


class Notify(BuiltinTool):
    spec = ToolSpec(
        name="local/notify",
        category=ToolCategory.NETWORK,
        description="Send a notification to a channel (appended to the resource's outbox).",
        writes=True,
        irreversible=True,
        side_effects=("external:notification",),
    )
    params = (
        Param("resource", ParamType.TEXT, "a resource with sandbox strategy none (a folder)"),
        Param("channel", ParamType.TEXT, "where the notification goes, e.g. '#releases'"),
        Param("message", ParamType.TEXT, "the notification text"),
    )

    def perform(self, context: ToolContext, arguments: Arguments) -> ToolOutcome:
        name, resource_id = self.spec.name, arguments.text("resource")
        channel, message = arguments.text("channel"), arguments.text("message")
        if len(channel) > MAX_CHANNEL or any(not c.isprintable() for c in channel):
            return refused(
                f"{name}: channel must be at most {MAX_CHANNEL} printable characters (one line)"
            )
        if len(message) > MAX_MESSAGE:
            return refused(f"{name}: message is longer than {MAX_MESSAGE} characters")
        sandbox = open_sandbox(context, resource_id)
        if sandbox.resource.sandbox_strategy is not SandboxStrategyName.NONE:
            return refused(
                f"{name}: resource {resource_id} uses strategy {strategy_of(sandbox)}; "
                "notifications go to a resource with sandbox strategy none"
            )
        folder = sandbox.workdir
        if folder is None:
            return refused(
                f"{name}: resource {resource_id} is not a folder ({sandbox.resource.location}); "
                "its outbox needs one"
            )
        record = {"time": utc_now().isoformat(), "channel": channel, "message": message}
        try:
            line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        except UnicodeEncodeError:
            return refused(f"{name}: channel or message is not valid Unicode")
        try:
            fd = os.open(resolve_inside(folder, OUTBOX), _FLAGS, 0o644)
        except OSError as exc:
            return refused(f"{name}: cannot open {OUTBOX}: {exc.strerror}")
        written = 0
        try:
            while written < len(line):  # O_APPEND: each write lands at the end
                written += os.write(fd, line[written:])
        except OSError as exc:
            partial = changed(context, resource_id) if written else ()
            return ToolOutcome(False, f"{name}: cannot write {OUTBOX}: {exc.strerror}", partial)
        finally:
            os.close(fd)
        writes = changed(context, resource_id)
        return ToolOutcome(
            ok=True, output=f"notified {channel} (appended to {OUTBOX})", writes=writes
        )
