"""The profile registry on SQLite and PostgreSQL: built-ins, custom profiles, bad files."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select, update

from cleveragents_tui.automation.profiles import (
    ProfileError,
    ProfileRegistry,
    load_builtin_profiles,
    load_profile_file,
    parse_profile_yaml,
)
from cleveragents_tui.domain.enums import PlanState
from cleveragents_tui.domain.errors import NotFoundError, StoreCorruptedError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.profile import BUILTIN_PROFILE_NAMES, AutomationFlag, AutomationProfile
from cleveragents_tui.resources import data_path
from cleveragents_tui.store.profile_repository import AutomationProfileRepository
from cleveragents_tui.store.store import Store
from cleveragents_tui.store.tables import AutomationProfileRow, PlanRow

THRESHOLDS = "\n".join(f"{flag.value}: 0.5" for flag in AutomationFlag)


def profile_yaml(name: str = "local/mine", extra: str = "", **thresholds: object) -> str:
    lines = [f"name: {name}", 'description: "mine"']
    for flag in AutomationFlag:
        value = thresholds.get(flag.value, 0.5)
        if value is not None:
            lines.append(f"{flag.value}: {value}")
    return "\n".join(lines) + "\n" + extra


def add_file(
    registry: ProfileRegistry, path: str | Path, *, replace: bool = False
) -> AutomationProfile:
    """What `agents automation-profile add FILE` does: read, validate, register."""
    profile = load_profile_file(path)
    registry.add(profile, replace=replace, source=str(path))
    return profile


def write(tmp_path: Path, text: str, filename: str = "p.yaml") -> Path:
    path = tmp_path / filename
    path.write_text(text, encoding="utf-8")
    return path


def stored_names(store: Store) -> list[str]:
    with store.unit_of_work() as uow:
        return AutomationProfileRepository(uow._session).names()


def one_line(error: Exception) -> str:
    text = str(error)
    assert "\n" not in text
    return text


# Reading -------------------------------------------------------------------------------


def test_builtins_listed_first_in_spec_order(store: Store) -> None:
    registry = ProfileRegistry(store)
    assert [p.name for p in registry.all()] == list(BUILTIN_PROFILE_NAMES)
    assert registry.names() == list(BUILTIN_PROFILE_NAMES)
    for name in BUILTIN_PROFILE_NAMES:
        assert registry.get(name) is load_builtin_profiles()[name]
    assert stored_names(store) == []  # built-ins are never stored


def test_unknown_profile_lists_the_known_names(store: Store) -> None:
    add_file(ProfileRegistry(store), data_path("profiles", "examples", "careful-auto.yaml"))
    with pytest.raises(NotFoundError) as caught:
        ProfileRegistry(store).get("local/nope")
    message = one_line(caught.value)
    assert "no automation profile named 'local/nope'" in message
    assert "manual, review, supervised, cautious, trusted, auto, ci, full-auto" in message
    assert "local/careful-auto" in message


# Adding, replacing, removing -----------------------------------------------------------


def test_add_show_list_remove(store: Store, tmp_path: Path) -> None:
    registry = ProfileRegistry(store)
    added = add_file(registry, write(tmp_path, profile_yaml(edit_code=0.3)))
    assert added.name == "local/mine"
    got = registry.get("local/mine")
    assert got == added
    assert got.threshold("edit_code") == 0.3
    assert [p.name for p in registry.all()][-1] == "local/mine"
    assert registry.remove("local/mine") == added
    assert stored_names(store) == []
    with pytest.raises(NotFoundError):
        registry.get("local/mine")


def test_the_spec_examples_register(store: Store) -> None:
    registry = ProfileRegistry(store)
    for example in ("careful-auto", "nuanced-auto"):
        add_file(registry, data_path("profiles", "examples", f"{example}.yaml"))
    assert stored_names(store) == ["local/careful-auto", "local/nuanced-auto"]
    nuanced = registry.get("local/nuanced-auto")
    assert nuanced.proceeds("execute_command", 0.7)
    assert not nuanced.proceeds("execute_command", 0.69)


def test_custom_profiles_listed_by_name_after_builtins(store: Store, tmp_path: Path) -> None:
    registry = ProfileRegistry(store)
    for name in ("team/zeta", "local/alpha", "team/beta"):
        add_file(registry, write(tmp_path, profile_yaml(name), f"{name.replace('/', '_')}.y"))
    names = [p.name for p in registry.all()]
    assert names == [*BUILTIN_PROFILE_NAMES, "local/alpha", "team/beta", "team/zeta"]


def test_full_definition_round_trips(store: Store, tmp_path: Path) -> None:
    extra = """safety:
  require_sandbox: false
  allowed_skill_categories: [docs, tests]
  max_cost_per_plan: 1.25
  max_total_cost: 10
  max_retries_per_step: 0
guards:
  max_tool_calls_per_step: 4
  max_total_cost: 0.5
  tool_allowlist: [read, grep]
  tool_denylist: []
  require_approval_for_writes: true
"""
    registry = ProfileRegistry(store)
    added = add_file(registry, write(tmp_path, profile_yaml(extra=extra)))
    again = registry.get("local/mine")
    assert again == added
    assert again.safety.allowed_skill_categories == ("docs", "tests")
    assert again.guards is not None
    assert again.guards.tool_denylist == ()


def test_existing_name_refused_unless_replace(store: Store, tmp_path: Path) -> None:
    registry = ProfileRegistry(store)
    add_file(registry, write(tmp_path, profile_yaml(edit_code=0.3)))
    second = write(tmp_path, profile_yaml(edit_code=0.9), "second.yaml")
    with pytest.raises(ProfileError) as caught:
        add_file(registry, second)
    assert one_line(caught.value) == (
        "automation profile local/mine already exists: "
        "pass --replace to overwrite it, or choose another name"
    )
    assert registry.get("local/mine").threshold("edit_code") == 0.3
    add_file(registry, second, replace=True)
    assert registry.get("local/mine").threshold("edit_code") == 0.9
    assert stored_names(store) == ["local/mine"]


def test_add_reports_whether_it_replaced(store: Store) -> None:
    registry = ProfileRegistry(store)
    profile = parse_profile_yaml(profile_yaml(), "x.yaml")
    assert registry.add(profile) is False
    assert registry.add(profile, replace=True) is True
    assert registry.add(parse_profile_yaml(profile_yaml("local/other"), "y"), replace=True) is False


@pytest.mark.parametrize("name", BUILTIN_PROFILE_NAMES)
def test_builtins_cannot_be_shadowed(store: Store, tmp_path: Path, name: str) -> None:
    with pytest.raises(ProfileError) as caught:
        add_file(ProfileRegistry(store), write(tmp_path, profile_yaml(name)), replace=True)
    message = one_line(caught.value)
    assert message.startswith(f"{tmp_path / 'p.yaml'}: name: {name} is a built-in automation ")
    assert "built-in profiles cannot be shadowed" in message
    assert f"local/{name}" in message
    assert stored_names(store) == []
    assert ProfileRegistry(store).get(name) is load_builtin_profiles()[name]


@pytest.mark.parametrize("name", BUILTIN_PROFILE_NAMES)
def test_builtins_cannot_be_removed(store: Store, name: str) -> None:
    with pytest.raises(ProfileError) as caught:
        ProfileRegistry(store).remove(name)
    assert one_line(caught.value) == (
        f"{name} is a built-in automation profile and cannot be removed: "
        "only custom (namespace/name) profiles can be removed"
    )
    assert ProfileRegistry(store).get(name).name == name


def test_remove_unknown(store: Store) -> None:
    with pytest.raises(NotFoundError, match="no automation profile named 'local/ghost'"):
        ProfileRegistry(store).remove("local/ghost")


def test_remove_refused_while_an_unfinished_plan_uses_it(store: Store, tmp_path: Path) -> None:
    registry = ProfileRegistry(store)
    add_file(registry, write(tmp_path, profile_yaml()))
    plan = Plan(action="local/act", automation_profile="local/mine")
    with store.unit_of_work(write=True) as uow:
        uow.plans.add(plan)
        uow.commit()
    with pytest.raises(ProfileError) as caught:
        registry.remove("local/mine")
    assert one_line(caught.value) == (
        f"automation profile local/mine is used by 1 unfinished plan ({plan.plan_id}): "
        "apply or cancel them first"
    )
    assert stored_names(store) == ["local/mine"]
    with store.unit_of_work(write=True) as uow:
        uow._session.execute(
            update(PlanRow)
            .where(PlanRow.plan_id == plan.plan_id)
            .values(state=PlanState.CANCELLED.value)
        )
        uow.commit()
    registry.remove("local/mine")
    assert stored_names(store) == []


# Bad files: one clear line, nothing registered -----------------------------------------

BAD_FILES = {
    "unknown key": (
        profile_yaml(extra="edit_cod: 0.5\n"),
        "p.yaml: edit_cod: unknown key: did you mean edit_code?",
    ),
    "unknown safety key": (
        profile_yaml(extra="safety:\n  require_sandboxes: true\n"),
        "p.yaml: safety.require_sandboxes: unknown key: did you mean require_sandbox?",
    ),
    "threshold 1.5": (
        profile_yaml(edit_code=1.5),
        "p.yaml: edit_code: must be a number between 0.0 and 1.0 (got 1.5)",
    ),
    "negative threshold": (
        profile_yaml(select_tool=-0.1),
        "p.yaml: select_tool: must be a number between 0.0 and 1.0 (got -0.1)",
    ),
    "threshold of the wrong type": (
        profile_yaml(create_tool='"high"'),
        "p.yaml: create_tool: must be a number between 0.0 and 1.0 (got 'high')",
    ),
    "boolean threshold": (
        profile_yaml(create_tool="true"),
        "p.yaml: create_tool: must be a number between 0.0 and 1.0 (got true)",
    ),
    "safety of the wrong type": (
        profile_yaml(extra="safety: strict\n"),
        "p.yaml: safety: must be a mapping of keys to values (got 'strict')",
    ),
    "boolean of the wrong type": (
        profile_yaml(extra='safety:\n  require_sandbox: "yes"\n'),
        "p.yaml: safety.require_sandbox: must be true or false (got 'yes')",
    ),
    "retries out of range": (
        profile_yaml(extra="safety:\n  max_retries_per_step: 101\n"),
        "p.yaml: safety.max_retries_per_step: must be <= 100 (got 101)",
    ),
    "cost order": (
        profile_yaml(extra="safety:\n  max_cost_per_plan: 5\n  max_total_cost: 1\n"),
        "p.yaml: safety: max_cost_per_plan (5.0) must be <= max_total_cost (1.0)",
    ),
    "missing threshold": (
        profile_yaml(approve_plan=None),
        "p.yaml: approve_plan: is missing: give all 11 thresholds",
    ),
    "missing namespace": (
        profile_yaml("careful"),
        "p.yaml: name: 'careful' has no namespace",
    ),
    "bad name": (profile_yaml("a/b/c"), "p.yaml: name: 'a/b/c' is not a namespace/name"),
    "unsafe tag": (
        "name: !!python/object/apply:os.system ['touch /tmp/pwned']\n" + THRESHOLDS,
        "p.yaml: line 1: the YAML tag !!python/object/apply:os.system is not allowed",
    ),
    "python name tag": (
        profile_yaml(extra="x: !!python/name:os.system\n"),
        "p.yaml: line 14: the YAML tag !!python/name:os.system is not allowed",
    ),
    "not a mapping": ("- local/mine\n- 0.5\n", "p.yaml: a profile must be a YAML mapping"),
    "scalar": ("just text\n", "p.yaml: a profile must be a YAML mapping"),
    "empty file": ("", "p.yaml: the file is empty"),
    "only comments": ("# nothing here\n", "p.yaml: the file is empty"),
    "broken YAML": ("name: [local/mine\n", "p.yaml: line 2: not valid YAML"),
    "duplicate key": (
        profile_yaml(extra="edit_code: 0.9\n"),
        "p.yaml: line 14: duplicate key 'edit_code'",
    ),
    "alias": (
        "base: &b 0.5\n" + profile_yaml(extra="x: *b\n"),
        "anchors and aliases (*name) are not supported",
    ),
    "non-string key": (profile_yaml(extra="1: 2\n"), "p.yaml: key 1 is not a string"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_profile_files_are_refused(store: Store, tmp_path: Path, case: str) -> None:
    text, expected = BAD_FILES[case]
    path = write(tmp_path, text)
    with pytest.raises(ProfileError) as caught:
        add_file(ProfileRegistry(store), path)
    message = one_line(caught.value)
    assert message.startswith(str(path) + ":")
    assert expected.removeprefix("p.yaml") in message
    assert ": " in message.removeprefix(str(path) + ":")  # a fix follows the problem
    assert stored_names(store) == []


def test_unsafe_tag_never_runs(store: Store, tmp_path: Path) -> None:
    canary = tmp_path / "pwned"
    text = f"name: !!python/object/apply:os.system ['touch {canary}']\n" + THRESHOLDS
    with pytest.raises(ProfileError):
        add_file(ProfileRegistry(store), write(tmp_path, text))
    assert not canary.exists()


def test_missing_file_and_directory(store: Store, tmp_path: Path) -> None:
    registry = ProfileRegistry(store)
    with pytest.raises(ProfileError, match="no such file"):
        add_file(registry, tmp_path / "absent.yaml")
    with pytest.raises(ProfileError, match="not a file"):
        add_file(registry, tmp_path)
    assert stored_names(store) == []


def test_not_utf8_and_too_large(store: Store, tmp_path: Path) -> None:
    registry = ProfileRegistry(store)
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"name: \xff\xfe\n")
    with pytest.raises(ProfileError, match="is not UTF-8 text"):
        add_file(registry, binary)
    huge = tmp_path / "huge.yaml"
    huge.write_text(profile_yaml() + "# " + "x" * 300_000 + "\n", encoding="utf-8")
    with pytest.raises(ProfileError, match="larger than 256 KiB"):
        add_file(registry, huge)
    assert stored_names(store) == []


def test_several_problems_are_counted(tmp_path: Path) -> None:
    with pytest.raises(ProfileError) as caught:
        parse_profile_yaml("name: local/x\n", "few.yaml")
    assert "(and 10 more problems)" in one_line(caught.value)


# The stored row ------------------------------------------------------------------------


def test_row_holds_the_models_json(store: Store, tmp_path: Path) -> None:
    added = add_file(ProfileRegistry(store), write(tmp_path, profile_yaml()))
    with store.unit_of_work() as uow:
        row = uow._session.scalars(select(AutomationProfileRow)).one()
        assert row.name == "local/mine"
        assert row.description == "mine"
        assert row.created_at is not None
        assert type(added).model_validate_json(row.definition) == added


@pytest.mark.parametrize(
    ("definition", "expected"),
    [
        ("{not json", "column definition holds invalid JSON"),
        ("[1, 2]", "column definition is not a JSON object"),
        ('{"name": "local/mine"}', "definition.decompose_task is invalid"),
    ],
)
def test_corrupted_row(store: Store, tmp_path: Path, definition: str, expected: str) -> None:
    add_file(ProfileRegistry(store), write(tmp_path, profile_yaml()))
    with store.unit_of_work(write=True) as uow:
        uow._session.execute(update(AutomationProfileRow).values(definition=definition))
        uow.commit()
    with pytest.raises(StoreCorruptedError, match="automation_profiles row local/mine") as caught:
        ProfileRegistry(store).get("local/mine")
    assert expected in str(caught.value)


def test_row_naming_another_profile_is_corrupted(store: Store, tmp_path: Path) -> None:
    add_file(ProfileRegistry(store), write(tmp_path, profile_yaml()))
    other = parse_profile_yaml(profile_yaml("local/other"), "x").model_dump_json()
    with store.unit_of_work(write=True) as uow:
        uow._session.execute(update(AutomationProfileRow).values(definition=other))
        uow.commit()
    with pytest.raises(StoreCorruptedError, match="names another profile"):
        ProfileRegistry(store).get("local/mine")
