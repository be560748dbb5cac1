"""The eight built-in profiles, checked cell by cell against the table of behavior.md.

The table below is copied from the specification (Built-in Automation Profiles) by hand,
independently of the YAML files, so a wrong cell in either shows up here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from cleveragents_tui.automation.profiles import load_builtin_profiles, load_profile_file
from cleveragents_tui.domain.profile import BUILTIN_PROFILE_NAMES, AutomationFlag
from cleveragents_tui.resources import data_path

COLUMNS = ("manual", "review", "supervised", "cautious", "trusted", "auto", "ci", "full-auto")

SPEC_TABLE = """
decompose_task                  1.0   0.0   0.0   0.7   0.0   0.0   0.0   0.0
create_tool                     1.0   0.0   1.0   0.7   0.0   0.0   0.0   0.0
select_tool                     1.0   1.0   1.0   1.0   1.0   1.0   0.0   0.0
edit_code                       1.0   1.0   0.0   0.6   0.0   0.0   0.0   0.0
execute_command                 1.0   1.0   1.0   0.8   0.0   0.0   0.0   0.0
create_file                     1.0   1.0   1.0   0.7   0.0   0.0   0.0   0.0
delete_content                  1.0   1.0   1.0   0.8   1.0   0.0   0.0   0.0
access_network                  1.0   1.0   1.0   0.9   1.0   1.0   0.0   0.0
install_dependency              1.0   0.0   1.0   0.7   0.0   0.0   0.0   0.0
modify_config                   1.0   0.0   0.0   0.0   0.0   0.0   0.0   0.0
approve_plan                    1.0   1.0   1.0   0.6   1.0   0.0   0.0   0.0
safety.require_sandbox          true  true  true  true  true  true  true  false
safety.require_checkpoints      true  true  true  true  true  true  true  false
safety.allow_unsafe_tools       false false false false false false false true
safety.require_human_approval   false false false false false false false false
safety.allowed_skill_categories []    []    []    []    []    []    []    []
safety.max_cost_per_plan        null  null  null  null  null  null  null  null
safety.max_total_cost           null  null  null  null  null  null  null  null
safety.max_retries_per_step     3     3     3     3     3     3     3     3
"""

_LITERALS: dict[str, Any] = {"true": True, "false": False, "null": None, "[]": ()}


def _cell(text: str) -> Any:
    if text in _LITERALS:
        return _LITERALS[text]
    return int(text) if text.isdigit() else float(text)


def _spec() -> dict[str, dict[str, Any]]:
    """{profile: {row: expected value}}."""
    table: dict[str, dict[str, Any]] = {name: {} for name in COLUMNS}
    for line in SPEC_TABLE.strip().splitlines():
        row, *cells = line.split()
        assert len(cells) == len(COLUMNS), line
        for name, cell in zip(COLUMNS, cells, strict=True):
            table[name][row] = _cell(cell)
    return table


SPEC = _spec()
CELLS = [(name, row) for name in COLUMNS for row in SPEC[name]]


def test_the_table_covers_every_flag_and_every_safety_field() -> None:
    rows = set(SPEC["manual"])
    assert {r for r in rows if not r.startswith("safety.")} == {f.value for f in AutomationFlag}
    assert {r.removeprefix("safety.") for r in rows if r.startswith("safety.")} == {
        "require_sandbox",
        "require_checkpoints",
        "allow_unsafe_tools",
        "require_human_approval",
        "allowed_skill_categories",
        "max_cost_per_plan",
        "max_total_cost",
        "max_retries_per_step",
    }
    assert len(CELLS) == 8 * 19


def test_eight_builtins_in_spec_order() -> None:
    assert BUILTIN_PROFILE_NAMES == COLUMNS
    assert tuple(load_builtin_profiles()) == COLUMNS
    for name, profile in load_builtin_profiles().items():
        assert profile.name == name
        assert profile.is_builtin
        assert profile.guards is None
        assert profile.description


@pytest.mark.parametrize(("name", "row"), CELLS, ids=[f"{n}:{r}" for n, r in CELLS])
def test_cell(name: str, row: str) -> None:
    profile = load_builtin_profiles()[name]
    expected = SPEC[name][row]
    if row.startswith("safety."):
        actual = getattr(profile.safety, row.removeprefix("safety."))
    else:
        actual = profile.threshold(row)
    assert actual == expected
    assert type(actual) is type(expected)


@pytest.mark.parametrize("name", COLUMNS)
def test_yaml_files_spell_out_every_cell(name: str) -> None:
    """The files list every safety field explicitly: a changed default cannot alter them."""
    raw = yaml.safe_load(data_path("profiles", f"{name}.yaml").read_text(encoding="utf-8"))
    for row, expected in SPEC[name].items():
        if row.startswith("safety."):
            value = raw["safety"][row.removeprefix("safety.")]
        else:
            value = raw[row]
        assert (tuple(value) if isinstance(value, list) else value) == expected, row


def test_descriptions_match_the_prose() -> None:
    profiles = load_builtin_profiles()
    assert profiles["manual"].description.startswith("Maximum human control.")
    assert "default starting point" in profiles["manual"].description
    assert "CI/CD pipelines" in profiles["ci"].description
    assert "Unsafe tools are allowed" in profiles["full-auto"].description


def test_built_ins_are_read_once() -> None:
    assert load_builtin_profiles() is load_builtin_profiles()
    with pytest.raises(TypeError):
        load_builtin_profiles()["manual"] = load_builtin_profiles()["ci"]  # type: ignore[index]


EXAMPLES: dict[str, dict[str, float]] = {
    "careful-auto": {
        "decompose_task": 0.0,
        "create_tool": 0.0,
        "select_tool": 1.0,
        "edit_code": 0.0,
        "execute_command": 0.0,
        "create_file": 0.0,
        "delete_content": 1.0,
        "access_network": 1.0,
        "install_dependency": 0.0,
        "modify_config": 0.0,
        "approve_plan": 0.0,
    },
    "nuanced-auto": {
        "decompose_task": 0.0,
        "create_tool": 0.5,
        "select_tool": 1.0,
        "edit_code": 0.3,
        "execute_command": 0.7,
        "create_file": 0.5,
        "delete_content": 0.8,
        "access_network": 0.9,
        "install_dependency": 0.5,
        "modify_config": 0.0,
        "approve_plan": 0.6,
    },
}


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_spec_examples(example: str) -> None:
    path: Path = data_path("profiles", "examples", f"{example}.yaml")
    profile = load_profile_file(path)
    assert profile.name == f"local/{example}"
    assert {f.value: t for f, t in profile.thresholds().items()} == EXAMPLES[example]
    assert profile.safety.require_sandbox is True
    assert profile.safety.require_checkpoints is True
    assert profile.safety.allow_unsafe_tools is False
