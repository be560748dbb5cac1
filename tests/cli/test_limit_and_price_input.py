"""Bad limits and bad prices are refused in one line, exit 2, with nothing stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import Run

ACTION = """\
name: local/limited
prompt: Say hello
limits: {limits}
"""


@pytest.mark.parametrize(
    ("limits", "problem"),
    [
        ("{max_tool_invocations: -1}", "limits.max_tool_invocations: Input should be greater"),
        ("{max_tokens: many}", "limits.max_tokens: Input should be a valid integer"),
        ("{max_tokens: '12'}", "limits.max_tokens: Input should be a valid integer"),
        ("{max_tokens: true}", "limits.max_tokens: Input should be a valid integer"),
        ("{max_cost_usd: .inf}", "limits.max_cost_usd: Input should be a finite number"),
        ("{max_cost_usd: .nan}", "limits.max_cost_usd: Input should be"),
        ("{actor: {max_tokens_per_call: -5}}", "limits.actor.max_tokens_per_call"),
        ("{on_exceed: explode}", "limits.on_exceed: Input should be 'pause' or 'terminate'"),
    ],
)
def test_plan_use_refuses_a_bad_limit(run: Run, tmp_path: Path, limits: str, problem: str) -> None:
    action = tmp_path / "limited.action.yaml"
    action.write_text(ACTION.format(limits=limits), encoding="utf-8")
    result = run("plan", "use", str(action), "--automation-profile", "ci")
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert problem in line and "fix the action file" in line
    assert json.loads(run("plan", "list", "--format=json").output)["plans"] == []


@pytest.mark.parametrize("value", ["cheap", "-0.15", "nan", "inf", ""])
def test_config_set_refuses_a_price_that_is_not_a_number(run: Run, value: str) -> None:
    key = "prices.openai:gpt-4o-mini.input_per_mtok"
    result = run("config", "set", key, "--", value)  # "--": -0.15 is not an option
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert f"{key}: {value!r} is not a price" in line and "give a number of 0 or more" in line
    assert run("config", "get", key).exit_code == 1  # nothing stored


def test_config_set_stores_a_price_per_model(run: Run) -> None:
    key = "prices.openai:gpt-4.1-mini.output_per_mtok"
    assert run("config", "set", key, "1.6").exit_code == 0
    assert run("config", "get", key).output.strip() == "1.6"
    unknown = run("config", "set", "prices.openai:gpt-4o-mini.per_call", "1")
    assert unknown.exit_code == 2 and "unknown setting" in unknown.stderr
