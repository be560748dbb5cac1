"""Every command honours the global ``--format=json``, or refuses it in one line (exit 2).

The test walks every command registered under ``agents`` and runs each one, on a real
project (the demo: a git repository, a folder, a SQLite database), with ``--format=json``
before the command. What a command prints on stdout must then parse as JSON; a command
without JSON output must exit 2 with one line naming it and nothing on stdout. A command
added later without an entry below fails here until it is given one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from cleveragents_tui.cli import cli
from cleveragents_tui.cli.json_output import SPEAKS_JSON, has_own_format, leaf_commands

State = dict[str, Any]
Args = Callable[[State], list[str]]

PROFILE_YAML = """\
name: local/json-walk
decompose_task: 1.0
create_tool: 1.0
select_tool: 1.0
edit_code: 0.0
execute_command: 1.0
create_file: 1.0
delete_content: 1.0
access_network: 1.0
install_dependency: 1.0
modify_config: 1.0
approve_plan: 1.0
"""


def _pending(state: State, key: str) -> str:
    return str(state[key]["pending_approvals"][0]["approval_id"])


# In order: each step may use what earlier ones printed (kept in `state` by command name).
STEPS: list[tuple[str, Args]] = [
    ("demo", lambda s: ["--no-tui", "--dir", str(s["tmp"] / "demo")]),
    ("demo-data", lambda s: []),
    ("db upgrade", lambda s: []),
    ("plan list", lambda s: []),
    ("plan show", lambda s: [s["demo"]["plan_id"]]),
    ("plan tree", lambda s: [s["demo"]["plan_id"]]),
    ("plan explain", lambda s: [s["decision"]]),
    (
        "plan correct",
        lambda s: [s["decision"], "--mode=revert", "--guidance=again", "--choose=1", "--dry-run"],
    ),
    ("plan diff", lambda s: ["--correction", s["sample_correction"]]),
    ("approval list", lambda s: []),
    ("config set", lambda s: ["core.automation-profile", "auto"]),
    ("config get", lambda s: ["core.automation-profile"]),
    ("config list", lambda s: []),
    ("config unset", lambda s: ["core.automation-profile"]),
    ("automation-profile add", lambda s: ["--config", str(s["profile_file"])]),
    ("automation-profile list", lambda s: []),
    ("automation-profile show", lambda s: ["local/json-walk"]),
    ("action list", lambda s: []),
    ("action validate", lambda s: [s["demo"]["action_file"]]),
    ("action show", lambda s: [s["action"]]),
    ("resource list", lambda s: []),
    ("resource show", lambda s: [s["resource"]]),
    # A second plan, under a profile that asks at every gate.
    (
        "plan use",
        lambda s: [s["demo"]["action_file"], "--automation-profile", "local/json-walk"],
    ),
    ("approval approve", lambda s: [_pending(s, "plan use")]),
    ("plan run", lambda s: [s["plan use"]["plan"]["plan_id"]]),
    ("plan pause", lambda s: [s["plan use"]["plan"]["plan_id"]]),
    ("plan resume", lambda s: [s["plan use"]["plan"]["plan_id"]]),
    ("approval deny", lambda s: [_pending(s, "plan resume"), "--reason", "not now"]),
    (
        "plan edit-strategy",
        lambda s: [s["strategy"], "--to", "again", "--choose", "1", "--dry-run"],
    ),
    ("plan cancel", lambda s: [s["plan use"]["plan"]["plan_id"]]),
    ("plan discard", lambda s: [s["plan use"]["plan"]["plan_id"], "--dry-run"]),
    ("automation-profile remove", lambda s: ["local/json-walk"]),
    ("plan apply", lambda s: [s["demo"]["plan_id"]]),
    ("gc", lambda s: []),
    ("doctor", lambda s: []),
]

# Commands that exit non-zero with a JSON report by design.
EXIT_CODES = {"doctor": (0, 1)}


def _dummy_args(command: click.Command) -> list[str]:
    """A value for every required argument and option: a refusing command refuses before
    it looks at them."""
    args: list[str] = []
    for param in command.params:
        if not param.required:
            continue
        if isinstance(param, click.Option):
            args.append(param.opts[0])
        args.append("x")
    return args


def _run(url: str, name: str, args: list[str], *, after_the_name: bool = False) -> Result:
    """``agents --format=json NAME ARGS``, or with ``--format=json`` after them (every
    command that speaks JSON takes it there too)."""
    if after_the_name:
        return CliRunner().invoke(cli, ["--db", url, *name.split(), *args, "--format=json"])
    return CliRunner().invoke(cli, ["--db", url, "--format=json", *name.split(), *args])


def _remember(state: State, name: str, document: dict[str, Any]) -> None:
    state[name] = document
    if name == "plan tree":
        decisions = document["decisions"]
        state["decision"] = next(
            d["decision_id"] for d in decisions if d["decision_type"] == "implementation_choice"
        )
    if name == "plan apply":
        assert document["plan"]["state"] == "applied"
        assert any("cleveragents/apply/" in line for line in document["landed"]), document
    if name == "demo-data":
        state["sample_plan"] = document["plan"]["plan_id"]
    if name == "plan list":
        sample = next(p for p in document["plans"] if p["plan_id"] == state["sample_plan"])
        assert sample
    if name == "action list":
        state["action"] = document["actions"][0]["name"]
    if name == "resource list":
        state["resource"] = document["resources"][0]["resource_id"]
    if name in ("plan use", "plan run"):
        state.setdefault("plan use", document)


@pytest.mark.parametrize("after_the_name", [False, True], ids=["global", "after the name"])
def test_every_command_honours_or_refuses_the_global_json_format(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, after_the_name: bool
) -> None:
    """After the name too: `plan use`, `plan run`, `approval approve` and the other commands
    that print a plan's result said "No such option: --format" there, unlike `plan list`."""
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(tmp_path / "sandboxes"))
    url = str(tmp_path / "agents.db")
    profile_file = tmp_path / "profile.yaml"
    profile_file.write_text(PROFILE_YAML)
    state: State = {"tmp": tmp_path, "profile_file": profile_file}
    commands = dict(leaf_commands(cli))
    speaking = {n for n, c in commands.items() if n in SPEAKS_JSON or has_own_format(c)}
    missing = sorted(speaking - {name for name, _ in STEPS})
    assert not missing, f"give these commands a step in STEPS: {missing}"

    for name, args in STEPS:
        if name not in commands:
            continue  # not registered in this build
        if name == "action list":  # `action create` has no JSON output: registered as text
            created = CliRunner().invoke(
                cli, ["--db", url, "action", "create", state["demo"]["action_file"]]
            )
            assert created.exit_code == 0, created.output
        if name == "plan diff":
            state["sample_correction"] = _sample_correction(url, state)
        if name == "plan edit-strategy":
            state["strategy"] = _strategy_decision(url, state)
        result = _run(url, name, args(state), after_the_name=after_the_name)
        assert result.exit_code in EXIT_CODES.get(name, (0,)), (name, result.output)
        try:
            document = json.loads(result.stdout)
        except json.JSONDecodeError:
            pytest.fail(f"agents --format=json {name}: stdout is not JSON:\n{result.stdout}")
        assert isinstance(document, dict) and str(document.get("format", "")).startswith(
            "cleveragents."
        ), (name, document)
        _remember(state, name, document)

    for name in sorted(set(commands) - speaking):
        result = _run(url, name, _dummy_args(commands[name]))
        assert result.exit_code == 2, (name, result.output)
        assert result.stdout == "", name
        [line] = result.stderr.splitlines()
        assert f"agents {name} has no JSON output" in line and "leave out --format=json" in line


def _sample_correction(url: str, state: State) -> str:
    shown = json.loads(_run(url, "plan show", [state["sample_plan"]]).stdout)
    return str(shown["corrections"][0]["correction_id"])


def _strategy_decision(url: str, state: State) -> str:
    """The Strategize decision of the second plan (it is still in Strategize)."""
    plan_id = state["plan use"]["plan"]["plan_id"]
    tree = json.loads(_run(url, "plan tree", [plan_id]).stdout)
    return str(
        next(d["decision_id"] for d in tree["decisions"] if d["decision_type"] == "strategy_choice")
    )


def test_a_refusing_command_does_nothing(tmp_path: Path) -> None:
    url = str(tmp_path / "agents.db")
    result = CliRunner().invoke(cli, ["--db", url, "--format=json", "tui"])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "error: agents tui has no JSON output (--format=json): leave out --format=json for "
        "agents tui"
    )
