"""`agents plan use ACTION --prompt TEXT`: one action, many tasks; and a chat plan never runs
the starter action's placeholder as its task.

A user's repository after `agents init`, the real client stack (``ChatOpenAI``) against the
OpenAI-compatible test server, HOME in the test's folder.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_bring_your_own import Run, data_folder
from tests.cli.test_bring_your_own import home as home  # the fixtures
from tests.cli.test_bring_your_own import repo as repo
from tests.cli.test_bring_your_own import run as run
from tests.support.openai_server import OpenAIServer, finish_phase, record_decision
from tests.support.openai_server import openai_server as openai_server  # the fixture

pytest.importorskip("langchain_openai")

MODEL = "openai:gpt-4o-mini"
TASK = "Add a SECURITY.md that says how to report a vulnerability"


@pytest.fixture
def served(openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> OpenAIServer:
    for name, value in openai_server.env().items():
        monkeypatch.setenv(name, value)
    return openai_server


def _init(run: Run, home: Path) -> None:
    """`agents init`, then the starter action registered as it was written."""
    assert run("init").exit_code == 0
    starter = data_folder(home) / "actions" / "shop.action.yaml"
    assert run("action", "create", str(starter)).exit_code == 0


def _plans(run: Run) -> list[dict[str, object]]:
    listed: list[dict[str, object]] = json.loads(run("plan", "list", "--format=json").output)[
        "plans"
    ]
    return listed


def test_a_chat_plan_of_the_unedited_starter_is_refused_naming_prompt(
    run: Run, home: Path, repo: Path, served: OpenAIServer
) -> None:
    _init(run, home)

    result = run("plan", "use", "local/shop-change", "--model", MODEL)

    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert "the action's prompt is still the starter's placeholder" in line
    assert 'agents plan use local/shop-change --prompt "…"' in line
    assert _plans(run) == [] and served.completions == []  # nothing stored, nothing asked


@pytest.mark.parametrize("prompt", ["", "   \n  "])
def test_an_empty_prompt_is_refused(
    run: Run, home: Path, repo: Path, served: OpenAIServer, prompt: str
) -> None:
    _init(run, home)

    result = run("plan", "use", "local/shop-change", "--model", MODEL, "--prompt", prompt)

    assert result.exit_code == 2
    assert result.stderr.strip() == (
        'error: --prompt is empty: say the task in words, e.g. --prompt "Add a CONTRIBUTING.md"'
    )
    assert _plans(run) == []


def test_the_prompt_given_is_the_plans_task_the_model_works_from(
    run: Run, home: Path, repo: Path, served: OpenAIServer
) -> None:
    _init(run, home)
    served.add(
        record_decision(
            key="approach",
            decision_type="strategy_choice",
            question="Where?",
            chosen_option="SECURITY.md at the top",
            confidence=0.9,
        ),
        finish_phase(),
        finish_phase(),
    )

    result = run("plan", "use", "local/shop-change", "--model", MODEL, "--prompt", f"  {TASK}\n")

    assert result.exit_code == 0, result.stderr
    assert all(f"## Task (the plan's prompt)\n{TASK}" in c.text for c in served.completions)
    [plan] = _plans(run)
    tree = json.loads(run("plan", "tree", str(plan["plan_id"]), "--format=json").output)
    root = tree["decisions"][0]
    assert (root["decision_type"], root["chosen_option"]) == ("prompt_definition", TASK)
    # the action keeps its own prompt: the task was this plan's
    shown = json.loads(run("action", "show", "local/shop-change", "--format=json").output)
    assert shown["definition"]["prompt"].startswith("Describe the change you want")
