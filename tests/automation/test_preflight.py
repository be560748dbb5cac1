"""The seven pre-flight checks, each failing with a line that names it and the fix."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cleveragents_tui.automation.preflight import (
    Check,
    PreflightContext,
    PreflightError,
    run_preflight,
)
from cleveragents_tui.automation.profiles import load_builtin_profiles
from cleveragents_tui.domain.profile import AutomationProfile
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.domain.tool import ToolSpec

TOOLS = {
    spec.name: spec
    for spec in (
        ToolSpec(name="local/write-file", category="write", writes=True),
        ToolSpec(name="local/read-file", category="read"),
        ToolSpec(
            name="local/notify",
            category="network",
            side_effects=("external:chat",),
            irreversible=True,
        ),
        ToolSpec(name="local/raw-shell", category="command", writes=True, checkpointable=False),
        ToolSpec(name="local/rm-rf", category="command", writes=True, unsafe=True),
        ToolSpec(name="local/pytest", category="validation"),
    )
}
ACTORS = frozenset({"local/scripted"})


def profile(name: str) -> AutomationProfile:
    return load_builtin_profiles()[name]


@pytest.fixture
def resources(tmp_path: Path) -> dict[str, Resource]:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    db = tmp_path / "app.db"
    sqlite3.connect(db).close()
    (tmp_path / "docs").mkdir()
    items = [
        Resource(
            resource_id="local/repo",
            kind="git",
            location=str(repo),
            sandbox_strategy="git_worktree",
        ),
        Resource(
            resource_id="local/db",
            kind="database",
            location=str(db),
            sandbox_strategy="transaction_rollback",
        ),
        Resource(
            resource_id="local/docs",
            kind="filesystem",
            location=str(tmp_path / "docs"),
            sandbox_strategy="filesystem_copy",
        ),
        Resource(
            resource_id="local/chat",
            kind="external",
            location="https://chat.example.invalid",
            sandbox_strategy="none",
        ),
    ]
    return {r.resource_id: r for r in items}


def action(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "local/add-greeting",
        "prompt": "Add a greeting",
        "resources": ["local/repo", "local/db", "local/docs", "local/chat"],
        "tools": ["local/read-file"],
        "validations": ["local/pytest"],
        "decisions": [
            {
                "key": "strategy",
                "type": "strategy_choice",
                "question": "How?",
                "alternatives": [{"option": "async"}, {"option": "sync"}],
            },
            {
                "key": "impl",
                "type": "implementation_choice",
                "question": "Write it",
                "parent": "strategy",
                "alternatives": [{"option": "edit", "tool_calls": [{"tool": "local/write-file"}]}],
            },
            {
                "key": "tell",
                "type": "tool_invocation",
                "question": "Notify?",
                "parent": "impl",
                "alternatives": [{"option": "notify", "tool_calls": [{"tool": "local/notify"}]}],
            },
        ],
    }
    base.update(overrides)
    return base


def context(
    resources: dict[str, Resource], name: str = "cautious", **changes: Any
) -> PreflightContext:
    fields: dict[str, Any] = {
        "profile": profile(name),
        "tools": TOOLS,
        "actors": ACTORS,
        "resources": resources,
    }
    fields.update(changes)
    return PreflightContext(**fields)


def fails(check: Check, raw: dict[str, Any], ctx: PreflightContext, *fragments: str) -> None:
    with pytest.raises(PreflightError) as caught:
        run_preflight(raw, ctx)
    assert caught.value.check is check
    line = str(caught.value)
    assert line.startswith(f"pre-flight check '{check}' failed: ")
    assert "\n" not in line
    for fragment in fragments:
        assert fragment in line


def test_a_well_formed_plan_passes_all_seven(resources: dict[str, Resource]) -> None:
    results = run_preflight(action(), context(resources))
    assert [r.check for r in results] == list(Check)
    assert all(r.passed for r in results)


def test_action_schema(resources: dict[str, Resource]) -> None:
    fails(Check.ACTION_SCHEMA, action(prompt=""), context(resources), "prompt")
    fails(Check.ACTION_SCHEMA, action(surprise=1), context(resources), "surprise")
    bad_ref = action(
        decisions=[
            {
                "key": "a",
                "type": "strategy_choice",
                "question": "q",
                "parent": "zz",
                "alternatives": [{"option": "x"}],
            }
        ]
    )
    fails(Check.ACTION_SCHEMA, bad_ref, context(resources), "not an earlier decision")


def test_actor_availability(resources: dict[str, Resource]) -> None:
    fails(
        Check.ACTOR_AVAILABILITY,
        action(actors={"strategy": "remote/gpt"}),
        context(resources),
        "actor remote/gpt is not registered",
        "local/scripted",
    )


def test_tool_existence(resources: dict[str, Resource]) -> None:
    fails(
        Check.TOOL_EXISTENCE,
        action(tools=["local/teleport"]),
        context(resources),
        "tool local/teleport is not registered",
    )


def test_automation_policy_blocks_unsafe_tools_unless_allowed(
    resources: dict[str, Resource],
) -> None:
    raw = action(tools=["local/rm-rf"])
    fails(
        Check.AUTOMATION_POLICY, raw, context(resources), "local/rm-rf is marked unsafe", "cautious"
    )
    relaxed = profile("full-auto")
    run_preflight(raw, context(resources, "full-auto", profile=relaxed))


def test_automation_policy_requires_a_sandbox_for_sandboxable_resources(
    resources: dict[str, Resource],
) -> None:
    resources["local/docs"] = Resource.model_validate(
        {**resources["local/docs"].model_dump(), "sandbox_strategy": "none"}
    )
    fails(
        Check.AUTOMATION_POLICY,
        action(),
        context(resources),
        "local/docs has sandbox strategy none",
    )


def test_automation_policy_limits_skill_categories(resources: dict[str, Resource]) -> None:
    base = profile("cautious")
    narrow = base.model_copy(
        update={"safety": base.safety.model_copy(update={"allowed_skill_categories": ["read"]})}
    )
    fails(
        Check.AUTOMATION_POLICY,
        action(),
        context(resources, profile=narrow),
        "outside the categories",
    )


def test_rollback_feasibility_rejects_tools_that_are_not_checkpointable(
    resources: dict[str, Resource],
) -> None:
    raw = action(tools=["local/raw-shell"])
    fails(
        Check.ROLLBACK_FEASIBILITY,
        raw,
        context(resources),
        "local/raw-shell is not checkpointable",
        "requires checkpoints",
    )
    run_preflight(raw, context(resources, "full-auto"))  # no require_checkpoints


def test_resource_accessibility(resources: dict[str, Resource], tmp_path: Path) -> None:
    fails(
        Check.RESOURCE_ACCESSIBILITY,
        action(resources=["local/ghost"]),
        context(resources),
        "local/ghost is not registered",
    )
    moved = dict(resources)
    moved["local/repo"] = resources["local/repo"].model_copy(
        update={"location": str(tmp_path / "docs")}
    )
    fails(
        Check.RESOURCE_ACCESSIBILITY,
        action(),
        context(moved),
        "is not a git repository",
    )
    gone = dict(resources)
    gone["local/db"] = resources["local/db"].model_copy(
        update={"location": str(tmp_path / "none.db")}
    )
    fails(Check.RESOURCE_ACCESSIBILITY, action(), context(gone), "does not exist")


def test_checking_a_sqlite_resource_does_not_change_it(resources: dict[str, Resource]) -> None:
    path = Path(resources["local/db"].location)
    before = path.read_bytes()
    run_preflight(action(), context(resources))
    assert path.read_bytes() == before
    assert not Path(f"{path}-wal").exists()


def test_validation_attachment_resolution(resources: dict[str, Resource]) -> None:
    fails(
        Check.VALIDATION_ATTACHMENTS,
        action(validations=["local/lint"]),
        context(resources),
        "validation local/lint is not registered",
    )
    fails(
        Check.VALIDATION_ATTACHMENTS,
        action(validations=["local/read-file"]),
        context(resources),
        "not a validation",
    )
