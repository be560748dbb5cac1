"""The tool registry, the built-in specs, argument checking and the Strategize rule."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from cleveragents_tui.actors.base import ToolContext, ToolOutcome
from cleveragents_tui.actors.tools import (
    DuplicateToolError,
    ToolRegistry,
    UnknownToolError,
    default_registry,
)
from cleveragents_tui.domain.enums import Phase
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.tool import ToolCategory, ToolSpec
from tests.actors.conftest import DB, FILES, GIT, OUTBOX, ToolWorld
from tests.support.folders import add_folder

BUILTINS = {
    # name: (category, writes, checkpointable, irreversible, unsafe)
    "local/read-file": (ToolCategory.READ, False, True, False, False),
    "local/list-files": (ToolCategory.READ, False, True, False, False),
    "local/search-files": (ToolCategory.READ, False, True, False, False),
    "local/write-file": (ToolCategory.WRITE, True, True, False, False),
    "local/edit-file": (ToolCategory.WRITE, True, True, False, False),
    "local/delete-file": (ToolCategory.WRITE, True, True, False, False),
    "local/delete": (ToolCategory.WRITE, True, True, False, False),
    "local/move": (ToolCategory.WRITE, True, True, False, False),
    "local/mkdir": (ToolCategory.WRITE, True, True, False, False),
    "local/symlink": (ToolCategory.WRITE, True, True, False, False),
    "local/chmod": (ToolCategory.WRITE, True, True, False, False),
    "local/run-command": (ToolCategory.COMMAND, True, True, False, False),
    "local/run-sql": (ToolCategory.DATABASE, True, True, False, False),
    "local/query-sql": (ToolCategory.READ, False, True, False, False),
    "local/notify": (ToolCategory.NETWORK, True, True, True, False),
    "local/run-tests": (ToolCategory.VALIDATION, False, True, False, False),
}


class _Echo:
    def __init__(self, name: str = "test/echo") -> None:
        self.spec = ToolSpec(name=name, category=ToolCategory.READ)
        self.parameters: dict[str, Any] = {"type": "object"}

    def run(self, context: ToolContext, arguments: Mapping[str, Any]) -> ToolOutcome:
        return ToolOutcome(ok=True, output=str(dict(arguments)))


def test_default_registry_holds_the_builtin_tools_with_their_flags() -> None:
    registry = default_registry()
    assert registry.names() == sorted(BUILTINS)
    assert [spec.name for spec in registry.specs()] == sorted(BUILTINS)
    for name, (category, writes, checkpointable, irreversible, unsafe) in BUILTINS.items():
        spec = registry.get(name)
        assert spec is not None
        assert spec.category is category
        assert (spec.writes, spec.checkpointable, spec.irreversible, spec.unsafe) == (
            writes,
            checkpointable,
            irreversible,
            unsafe,
        ), name
        assert registry.tool(name).spec is spec
    notify = registry.get("local/notify")
    assert notify is not None
    assert notify.side_effects == ("external:notification",)
    for tree_tool in ("local/delete", "local/move", "local/mkdir", "local/symlink", "local/chmod"):
        spec = registry.get(tree_tool)
        assert spec is not None
        assert spec.side_effects == ("writes:files",), tree_tool


def test_each_builtin_describes_its_arguments_as_json_schema() -> None:
    registry = default_registry()
    for name in registry.names():
        schema = registry.tool(name).parameters
        assert schema["type"] == "object"
        assert schema["additionalProperties"] is False
        assert "resource" in schema["required"]
        assert set(schema["required"]) <= set(schema["properties"])
    run = registry.tool("local/run-command").parameters
    assert run["properties"]["argv"]["type"] == "array"
    assert run["required"] == ["resource", "argv"]


def test_registry_refuses_a_duplicate_name() -> None:
    registry = ToolRegistry([_Echo()])
    with pytest.raises(DuplicateToolError, match="already registered"):
        registry.register(_Echo())
    assert len(registry) == 1
    with pytest.raises(DuplicateToolError):
        default_registry().register(_Echo("local/read-file"))


def test_unknown_tool_names_the_registered_ones() -> None:
    registry = ToolRegistry([_Echo(), _Echo("test/other")])
    assert registry.get("test/missing") is None
    assert "test/missing" not in registry
    assert "test/echo" in registry
    with pytest.raises(UnknownToolError) as caught:
        registry.tool("test/missing")
    assert isinstance(caught.value, UserError)
    assert "test/missing" in str(caught.value)
    assert "test/echo, test/other" in str(caught.value)
    with pytest.raises(UnknownToolError, match="none"):
        ToolRegistry().tool("test/echo")


def test_a_registered_custom_tool_runs(tool_world: ToolWorld) -> None:
    registry = ToolRegistry([_Echo()])
    outcome = registry.tool("test/echo").run(tool_world.context(), {"a": 1})
    assert outcome.ok
    assert outcome.output == "{'a': 1}"


BAD_ARGUMENTS = [
    ("local/read-file", {"resource": FILES}, "'path' is required"),
    ("local/read-file", {"resource": FILES, "path": 3}, "'path' must be a string"),
    ("local/read-file", {"resource": FILES, "path": ""}, "must not be empty"),
    ("local/read-file", {"resource": FILES, "path": "a", "mode": "r"}, "unknown argument 'mode'"),
    ("local/read-file", ["resource", FILES], "arguments must be an object"),
    ("local/write-file", {"resource": FILES, "path": "a"}, "'content' is required"),
    ("local/write-file", {"resource": FILES, "path": "a", "content": b"x"}, "must be a string"),
    (
        "local/write-file",
        {"resource": FILES, "path": "a", "content": "x", "executable": "yes"},
        "true or false",
    ),
    ("local/edit-file", {"resource": FILES, "path": "a", "old": "", "new": "x"}, "not be empty"),
    ("local/delete-file", {"path": "a"}, "'resource' is required"),
    ("local/run-command", {"resource": FILES, "argv": []}, "non-empty list"),
    ("local/run-command", {"resource": FILES, "argv": ["ls", 1]}, "argv[1] must be a string"),
    ("local/run-command", {"resource": FILES, "argv": [""]}, "must not be empty"),
    ("local/run-command", {"resource": FILES, "argv": ["ls", "a\x00b"]}, "NUL"),
    (
        "local/run-command",
        {"resource": FILES, "argv": ["true"], "timeout_seconds": "5"},
        "must be a number",
    ),
    (
        "local/run-command",
        {"resource": FILES, "argv": ["true"], "timeout_seconds": True},
        "must be a number",
    ),
    (
        "local/run-command",
        {"resource": FILES, "argv": ["true"], "timeout_seconds": float("nan")},
        "finite",
    ),
    ("local/run-sql", {"resource": DB, "sql": "SELECT 1", "params": [1]}, "must be an object"),
    (
        "local/run-sql",
        {"resource": DB, "sql": "SELECT :a", "params": {"a": [1]}},
        "string, number, boolean or null",
    ),
    ("local/notify", {"resource": OUTBOX, "channel": "#x"}, "'message' is required"),
    ("local/run-tests", {"resource": GIT, "argv": "pytest -q"}, "not a string"),
]


@pytest.mark.parametrize(("tool", "arguments", "reason"), BAD_ARGUMENTS)
def test_bad_arguments_give_a_one_line_reason_and_change_nothing(
    tool_world: ToolWorld, tool: str, arguments: Any, reason: str
) -> None:
    before = tool_world.outside()
    outcome = tool_world.call(tool, arguments)
    assert not outcome.ok
    assert reason in outcome.output
    assert outcome.output.startswith(tool)
    assert "\n" not in outcome.output
    assert outcome.writes == ()
    assert tool_world.sandboxes.modified() == set()
    assert tool_world.outside() == before


def test_unknown_or_invalid_resources_are_refused(tool_world: ToolWorld) -> None:
    for resource in ("local/nothing", "not-a-name", "../../etc"):
        outcome = tool_world.call("local/read-file", {"resource": resource, "path": "a"})
        assert not outcome.ok
        assert resource in outcome.output
    assert tool_world.sandboxes.modified() == set()


def test_a_resource_registered_for_other_plans_is_refused_as_not_the_plans(
    tool_world: ToolWorld,
) -> None:
    """A call naming a resource that is registered but not one of the plan's (a model's
    guess, a custom reasoner's slip) is told so and which are, not that a sandbox folder
    went missing."""
    store, plan_id = tool_world.sandboxes.store, tool_world.plan.plan_id
    elsewhere = tool_world.tmp / "elsewhere"
    add_folder(store, "local/elsewhere", elsewhere)
    with store.unit_of_work(write=True) as uow:
        uow.plan_actions.save(plan_id, {"name": "local/tools", "resources": [FILES, DB]})
        uow.commit()

    outcome = tool_world.call(
        "local/write-file", {"resource": "local/elsewhere", "path": "a", "content": "x"}
    )

    assert not outcome.ok
    assert outcome.output == (
        f"local/write-file: resource local/elsewhere is not a resource of plan {plan_id}: "
        f"name one of its resources: {FILES}, {DB}"
    )
    assert list(elsewhere.iterdir()) == []


WRITES_IN_STRATEGIZE = [
    ("local/write-file", {"resource": FILES, "path": "new.txt", "content": "x"}),
    ("local/edit-file", {"resource": FILES, "path": "docs/guide.md", "old": "v1", "new": "v2"}),
    ("local/delete-file", {"resource": FILES, "path": "docs/guide.md"}),
    ("local/run-command", {"resource": FILES, "argv": ["touch", "made.txt"]}),
    ("local/run-sql", {"resource": DB, "sql": "DELETE FROM greetings"}),
    ("local/notify", {"resource": OUTBOX, "channel": "#x", "message": "hi"}),
]


@pytest.mark.parametrize(("tool", "arguments"), WRITES_IN_STRATEGIZE)
def test_strategize_is_read_only(tool_world: ToolWorld, tool: str, arguments: Any) -> None:
    before = tool_world.outside()
    outcome = tool_world.call(tool, arguments, phase=Phase.STRATEGIZE)
    assert not outcome.ok
    assert outcome.output.startswith("Strategize is read-only")
    assert tool_world.sandboxes.modified() == set()
    assert tool_world.outside() == before
    files = tool_world.workdir(FILES)
    assert (files / "docs" / "guide.md").read_text() == "guide v1\n"
    assert not (files / "new.txt").exists()
    assert not (files / "made.txt").exists()
    rows = tool_world.sandboxes.get(DB).execute("SELECT count(*) FROM greetings")  # type: ignore[attr-defined]
    assert rows.all() == [(1,)]


def test_reads_and_validations_run_in_strategize(tool_world: ToolWorld) -> None:
    read = tool_world.call(
        "local/read-file", {"resource": FILES, "path": "docs/guide.md"}, Phase.STRATEGIZE
    )
    assert read.ok
    assert read.output == "guide v1\n"
    tests = tool_world.call(
        "local/run-tests", {"resource": GIT, "argv": ["true"]}, Phase.STRATEGIZE
    )
    assert tests.ok
    assert tool_world.sandboxes.modified() == set()


def test_note_write_is_called_exactly_for_writes(tool_world: ToolWorld) -> None:
    quiet: list[tuple[str, dict[str, object]]] = [
        ("local/read-file", {"resource": GIT, "path": "README.md"}),
        ("local/read-file", {"resource": GIT, "path": "missing.md"}),
        ("local/edit-file", {"resource": GIT, "path": "README.md", "old": "nope", "new": "x"}),
        ("local/delete-file", {"resource": GIT, "path": "missing.md"}),
        ("local/write-file", {"resource": GIT, "path": "../escape.md", "content": "x"}),
        ("local/run-command", {"resource": GIT, "argv": ["no-such-program-here"]}),
        ("local/run-tests", {"resource": GIT, "argv": ["sh", "-c", "exit 1"]}),
        ("local/run-sql", {"resource": DB, "sql": "SELECT nope FROM missing_table"}),
        ("local/notify", {"resource": GIT, "channel": "#x", "message": "hi"}),
    ]
    for tool, arguments in quiet:
        outcome = tool_world.call(tool, arguments)
        assert outcome.writes == (), tool
    assert tool_world.sandboxes.modified() == set()

    wrote = tool_world.call(
        "local/write-file", {"resource": GIT, "path": "notes/a.md", "content": "a\n"}
    )
    assert wrote.ok
    assert wrote.writes == (GIT,)
    assert tool_world.sandboxes.modified() == {GIT}
    sql = tool_world.call("local/run-sql", {"resource": DB, "sql": "DELETE FROM greetings"})
    assert sql.writes == (DB,)
    assert tool_world.sandboxes.modified() == {GIT, DB}


class _Spy:
    """SandboxAccess that records, at each note_write, whether the file was already written."""

    def __init__(self, world: ToolWorld, path: str) -> None:
        self.world, self.path, self.seen = world, path, list[bool]()

    def get(self, resource_id: str) -> Any:
        return self.world.sandboxes.get(resource_id)

    def note_write(self, resource_id: str) -> None:
        self.seen.append((self.world.workdir(resource_id) / self.path).exists())


@pytest.mark.parametrize(
    ("path", "first_change"), [("docs/new.txt", "docs/new.txt"), ("made/new.txt", "made")]
)
def test_note_write_comes_after_the_first_change(
    tool_world: ToolWorld, path: str, first_change: str
) -> None:
    spy = _Spy(tool_world, first_change)
    context = ToolContext(tool_world.plan.plan_id, Phase.EXECUTE, spy)
    tool = tool_world.registry.tool("local/write-file")
    assert tool.run(context, {"resource": FILES, "path": path, "content": "x"}).ok
    assert spy.seen == [True]
