"""Plans of a chat model on the real client stack (``ChatOpenAI`` over HTTP to the scripted
OpenAI-compatible server of tests/support/openai_server.py), over one folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_openai import ChatOpenAI

from cleveragents_tui.actors.reasoners.chat import ChatReasoner
from cleveragents_tui.actors.tools import default_registry
from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.store.store import Store
from tests.support.folders import add_folder
from tests.support.openai_server import API_KEY, OpenAIServer

RESOURCE = "local/calc"


def write(path: str, content: str) -> dict[str, Any]:
    """A ``write-file`` call on the plan's folder, as the model sends it."""
    return {
        "tool": "local/write-file",
        "arguments": {"resource": RESOURCE, "path": path, "content": content},
    }


def edit(path: str, old: str, new: str) -> dict[str, Any]:
    """An ``edit-file`` call on the plan's folder, as the model sends it."""
    arguments = {"resource": RESOURCE, "path": path, "old": old, "new": new}
    return {"tool": "local/edit-file", "arguments": arguments}


def run_chat_plan(
    store: Store,
    server: OpenAIServer,
    tmp_path: Path,
    name: str,
    prompt: str,
    profile: str = "ci",
    tools: tuple[str, ...] = ("local/write-file", "local/edit-file", "local/run-tests"),
) -> tuple[Plan, Path]:
    """Start a plan of a chat model over a new folder ``tmp_path/name``, registered as
    ``RESOURCE`` (filesystem_copy); it runs as far as the profile lets it."""
    folder = tmp_path / name  # a test may have put files there
    add_folder(store, RESOURCE, folder)
    action = Action(
        name=f"local/{name}",
        prompt=prompt,
        resources=(RESOURCE,),
        tools=tools,
    )
    options = chat_options(tmp_path, name, server)
    return start_plan(store, action, profile_override=profile, options=options), folder


def chat_options(tmp_path: Path, name: str, server: OpenAIServer) -> RunOptions:
    """The plan's runs and replays: the chat reasoner on the real client, the local server."""
    registry = default_registry()
    model = ChatOpenAI(
        model="gpt-4o-mini", base_url=server.base_url, api_key=API_KEY, max_retries=0
    )

    def chat(action: Action, chosen: Any) -> ChatReasoner:
        return ChatReasoner(model, action, registry.specs(), current_steps=chosen)

    return RunOptions(
        registry=registry, sandbox_base=tmp_path / f"{name}-sandboxes", reasoner_factory=chat
    )


def files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (bytecode left out), by its relative path."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }
