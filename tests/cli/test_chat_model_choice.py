"""Choosing the chat model from the CLI and the settings, and everything a person can get wrong.

The model is real (``ChatOpenAI`` through ``init_chat_model``) and answers from the
OpenAI-compatible test server on 127.0.0.1. A missing key, a missing package, a malformed
model or a model without a reasoner is one line and exit 2, with nothing stored and no
request sent.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml

from tests.cli.conftest import Run
from tests.support.openai_server import (
    OpenAIServer,
    finish_phase,
    http_error,
    record_decision,
    text,
)
from tests.support.openai_server import openai_server as openai_server  # the fixture

pytest.importorskip("langchain_openai")

MODEL = "openai:gpt-4o-mini"
STRATEGY = record_decision(
    key="approach",
    decision_type="strategy_choice",
    question="How?",
    chosen_option="step by step",
    confidence=0.9,
)


@pytest.fixture
def action(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(tmp_path / "sandboxes"))
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "think.yaml"
    path.write_text(yaml.safe_dump({"name": "local/think", "prompt": "Think it through"}))
    return str(path)


@pytest.fixture
def served(openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> OpenAIServer:
    """The server, with the environment pointing ``ChatOpenAI`` at it."""
    for name, value in openai_server.env().items():
        monkeypatch.setenv(name, value)
    return openai_server


def _plans(run: Run) -> list[dict[str, object]]:
    plans: list[dict[str, object]] = json.loads(run("plan", "list", "--format=json").output)[
        "plans"
    ]
    return plans


def _one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def test_no_api_key_is_one_line_and_nothing_is_stored(
    run: Run, action: str, openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)  # a server, but no key
    result = run("plan", "use", action, "--reasoner", "chat", "--model", MODEL)

    assert result.exit_code == 2
    line = _one_line(result.stderr)
    assert "OPENAI_API_KEY is not set" in line and "export OPENAI_API_KEY=" in line
    assert _plans(run) == []
    assert openai_server.requests == []


@pytest.mark.skipif(
    importlib.util.find_spec("langchain_anthropic") is not None,
    reason="langchain-anthropic is installed here",
)
def test_a_missing_provider_package_names_the_extra(
    run: Run, action: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    result = run("plan", "use", action, "--model", "anthropic:claude-sonnet-4-5")

    assert result.exit_code == 2
    line = _one_line(result.stderr)
    assert "langchain-anthropic" in line and "pip install 'cleveragents-tui[anthropic]'" in line
    assert _plans(run) == []
    refused = run("config", "set", "core.model", "anthropic:claude-sonnet-4-5")
    assert refused.exit_code == 2 and "cleveragents-tui[anthropic]" in refused.stderr
    assert run("config", "get", "core.model").exit_code == 1  # not stored


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--model", "gpt-4o-mini"), "is not PROVIDER:MODEL"),
        (  # a provider LangChain has under another name: the names it has
            ("--model", "gemini:gemini-2.0-flash"),
            "error: model gemini:gemini-2.0-flash: LangChain has no provider 'gemini': name one "
            "it has (",
        ),
        (("--reasoner", "chat"), "the chat reasoner needs a model"),
        (("--reasoner", "scripted", "--model", MODEL), "--model is for the chat reasoner"),
    ],
)
def test_a_model_that_is_not_named_right_is_refused(
    run: Run, action: str, served: OpenAIServer, args: tuple[str, ...], says: str
) -> None:
    result = run("plan", "use", action, *args)

    assert result.exit_code == 2
    assert says in _one_line(result.stderr)
    assert _plans(run) == []
    assert served.requests == []


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("core.reasoner", "gpt", "unknown reasoner 'gpt'"),
        ("core.model", "openai", "is not PROVIDER:MODEL"),
        ("core.model", "gemini:gemini-2.0-flash", "LangChain has no provider 'gemini'"),
        ("core.model-base-url", "localhost:8000", "is not an http(s) URL"),
        ("core.model-timeout", "soon", "is not a number of seconds above 0"),
        ("core.model-timeout", "0", "is not a number of seconds above 0"),
        ("core.model-timeout", "nan", "is not a number of seconds above 0"),
        ("core.model-timeout", "100000", "and at most a day"),
    ],
)
def test_config_set_refuses_a_bad_value(run: Run, key: str, value: str, says: str) -> None:
    result = run("config", "set", key, value)

    assert result.exit_code == 2
    assert says in _one_line(result.stderr)
    assert run("config", "get", key).exit_code == 1


def test_the_settings_choose_the_model_of_a_new_plan(
    run: Run, action: str, openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """core.reasoner, core.model and core.model-base-url; the base URL setting wins over
    OPENAI_BASE_URL (here a closed loopback port)."""
    monkeypatch.setenv("OPENAI_API_KEY", openai_server.env()["OPENAI_API_KEY"])
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    for key, value in (
        ("core.reasoner", "chat"),
        ("core.model", MODEL),
        ("core.model-base-url", openai_server.base_url),
    ):
        assert run("config", "set", key, value).exit_code == 0
    openai_server.add(STRATEGY, finish_phase(), finish_phase())

    result = run("plan", "use", action, "--automation-profile", "auto")

    assert result.exit_code == 0, result.output
    assert openai_server.pending == 0
    assert {r.body["model"] for r in openai_server.completions} == {"gpt-4o-mini"}
    (plan,) = _plans(run)
    tree = json.loads(run("plan", "tree", str(plan["plan_id"]), "--format=json").output)
    assert "step by step" in [d["chosen_option"] for d in tree["decisions"]]
    listed = run("config", "list").output
    assert "plan:" not in listed and "core.model = openai:gpt-4o-mini" in listed
    shown = json.loads(run("plan", "show", str(plan["plan_id"]), "--format=json").output)
    assert (shown["model"], shown["model_base_url"]) == (MODEL, openai_server.base_url)
    assert (
        f"model        {MODEL} at {openai_server.base_url} (the chat reasoner)"
        in run("plan", "show", str(plan["plan_id"])).output
    )


def test_a_scripted_plan_shows_no_model(run: Run, action: str) -> None:
    assert run("plan", "use", action, "--automation-profile", "auto").exit_code == 0
    (plan,) = _plans(run)
    shown = json.loads(run("plan", "show", str(plan["plan_id"]), "--format=json").output)
    assert shown["model"] is None
    shown_text = run("plan", "show", str(plan["plan_id"])).output
    assert not [line for line in shown_text.splitlines() if line.startswith("model ")]


def test_a_later_run_without_the_key_is_refused_before_it_changes_anything(
    run: Run, action: str, served: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan waits for a person before Strategize; the run after the approval is in a
    shell without the key: refused in one line, the plan as it was; with the key it goes on."""
    started = run("plan", "use", action, "--model", MODEL, "--automation-profile", "manual")
    assert started.exit_code == 0, started.output
    (plan,) = _plans(run)
    plan_id = str(plan["plan_id"])
    approvals = json.loads(run("approval", "list", "--format=json").output)["approvals"]
    assert run("approval", "approve", approvals[0]["approval_id"]).exit_code == 0
    before = _plans(run)

    monkeypatch.delenv("OPENAI_API_KEY")
    refused = run("plan", "run", plan_id)

    assert refused.exit_code == 2
    line = _one_line(refused.stderr)
    assert f"plan {plan_id} runs with {MODEL}" in line and "OPENAI_API_KEY" in line
    assert _plans(run) == before
    assert served.requests == []

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-local")
    served.add(STRATEGY, finish_phase(), finish_phase())
    assert run("plan", "run", plan_id).exit_code == 0
    assert served.completions  # the kept model was asked


def test_a_correction_without_the_key_is_refused_before_the_rollback(
    run: Run, action: str, served: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replay would ask the plan's model: without its key the correction is refused in
    one line, and the decision, the tree and the plan stay as they were."""
    served.add(STRATEGY, finish_phase(), finish_phase())
    started = run("plan", "use", action, "--model", MODEL, "--automation-profile", "auto")
    assert started.exit_code == 0, started.output
    (plan,) = _plans(run)
    plan_id = str(plan["plan_id"])
    tree_before = run("plan", "tree", plan_id, "--show-superseded", "--format=json").output
    decision = next(
        d for d in json.loads(tree_before)["decisions"] if d["chosen_option"] == "step by step"
    )
    asked = len(served.requests)

    monkeypatch.delenv("OPENAI_API_KEY")
    refused = run(
        "plan", "correct", decision["decision_id"], "--mode=revert",
        "--guidance", "all at once", "--yes",
    )  # fmt: skip

    assert refused.exit_code == 2
    line = _one_line(refused.stderr)
    assert f"plan {plan_id} runs with {MODEL}" in line and "OPENAI_API_KEY" in line
    assert run("plan", "tree", plan_id, "--show-superseded", "--format=json").output == tree_before
    assert _plans(run) == [plan]
    assert len(served.requests) == asked


def test_an_appended_plan_asks_its_parents_model(
    run: Run, action: str, served: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An append correction's new child plan keeps no model of its own: it asks the one its
    parent kept, and gets the guidance."""
    served.add(STRATEGY, finish_phase(), finish_phase())
    assert (
        run("plan", "use", action, "--model", MODEL, "--automation-profile", "auto").exit_code == 0
    )
    (plan,) = _plans(run)
    tree = json.loads(run("plan", "tree", str(plan["plan_id"]), "--format=json").output)
    decision = next(d for d in tree["decisions"] if d["chosen_option"] == "step by step")
    asked = len(served.completions)
    served.add(finish_phase(), finish_phase())

    appended = run(
        "plan", "correct", decision["decision_id"], "--mode=append",
        "--guidance", "double-check every step", "--yes",
    )  # fmt: skip

    assert appended.exit_code == 0, appended.output + appended.stderr
    later = served.completions[asked:]
    assert len(later) == 2 and all("double-check every step" in r.text for r in later)
    child = next(p for p in _plans(run) if p["parent_plan_id"] == plan["plan_id"])
    shown = json.loads(run("plan", "show", str(child["plan_id"]), "--format=json").output)
    assert shown["model"] == MODEL


def _append_whose_model_fails(
    run: Run, action: str, served: OpenAIServer, *, applied: bool
) -> tuple[str, dict[str, object]]:
    """A plan (applied or not) and an append correction of its strategy whose appended
    plan's model answers 500: the plan's id and the appended plan."""
    served.add(STRATEGY, finish_phase(), finish_phase())
    assert (
        run("plan", "use", action, "--model", MODEL, "--automation-profile", "auto").exit_code == 0
    )
    (plan,) = _plans(run)
    plan_id = str(plan["plan_id"])
    if applied:
        assert run("plan", "apply", plan_id).exit_code == 0
    tree = json.loads(run("plan", "tree", plan_id, "--format=json").output)
    decision = next(d for d in tree["decisions"] if d["chosen_option"] == "step by step")
    served.add(http_error(500, "the model is overloaded"))
    appended = run(
        "plan", "correct", decision["decision_id"], "--mode=append",
        "--guidance", "double-check every step", "--yes",
    )  # fmt: skip
    assert appended.exit_code == 1, appended.output
    child = next(p for p in _plans(run) if p["parent_plan_id"] == plan_id)
    assert f"go on with `agents plan run {child['plan_id']}`" in appended.stdout
    assert "the appended plan stays" in appended.stdout
    return plan_id, child


def test_an_appended_plan_whose_model_fails_leaves_the_applied_plan_applied(
    run: Run, action: str, served: OpenAIServer
) -> None:
    """The appended plan of an applied plan is made, then its model fails: the correction
    failed, the appended plan errored and named to run again — and the applied plan stays
    applied (it was marked errored, as if its Apply had failed). Run again once the model
    answers, the appended plan goes on to its own Apply."""
    plan_id, child = _append_whose_model_fails(run, action, served, applied=True)

    assert (child["phase"], child["state"]) == ("strategize", "errored")
    shown = json.loads(run("plan", "show", plan_id, "--format=json").output)
    assert (shown["plan"]["phase"], shown["plan"]["state"]) == ("apply", "applied")
    assert [c["status"] for c in shown["corrections"]] == ["failed"]
    assert shown["corrections"][0]["appended_plan_id"] == child["plan_id"]

    served.add(STRATEGY, finish_phase(), finish_phase())
    assert run("plan", "run", str(child["plan_id"])).exit_code == 0
    went_on = next(p for p in _plans(run) if p["plan_id"] == child["plan_id"])
    assert (went_on["phase"], went_on["state"]) == ("execute", "awaiting_approval")


def test_an_appended_plan_whose_model_fails_is_run_again_then_its_plan_goes_on(
    run: Run, action: str, served: OpenAIServer
) -> None:
    """Before Apply the appended plan works in its plan's sandboxes: its model failing
    stops the plan too (errored, with the reason), and once the appended plan is run again,
    `plan run` takes the plan to its Apply gate."""
    plan_id, child = _append_whose_model_fails(run, action, served, applied=False)
    shown = json.loads(run("plan", "show", plan_id, "--format=json").output)
    assert shown["plan"]["state"] == "errored"

    served.add(STRATEGY, finish_phase(), finish_phase())
    assert run("plan", "run", str(child["plan_id"])).exit_code == 0
    went_on = run("plan", "run", plan_id)
    assert went_on.exit_code == 0, went_on.output
    shown = json.loads(run("plan", "show", plan_id, "--format=json").output)
    assert (shown["plan"]["phase"], shown["plan"]["state"]) == ("execute", "awaiting_approval")
    assert run("plan", "apply", plan_id).exit_code == 0


def test_a_plan_whose_server_moved_goes_on_once_pointed_at_the_new_one(
    run: Run, action: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan keeps the server it started with. When that server is gone (a local one
    restarted on another port), a run fails to connect, and its line names `plan set-model
    PLAN --base-url URL`; after it, the run asks the new server and goes on. Before, the
    only way on was a new plan: the base URL could not be changed."""
    monkeypatch.setenv("OPENAI_API_KEY", "local")
    with OpenAIServer() as first:
        monkeypatch.setenv("OPENAI_BASE_URL", first.base_url)
        started = run("plan", "use", action, "--model", MODEL, "--automation-profile", "manual")
        assert started.exit_code == 0, started.output
    plan_id = str(_plans(run)[0]["plan_id"])
    [gate] = json.loads(run("approval", "list", "--format=json").output)["approvals"]
    assert run("approval", "approve", gate["approval_id"]).exit_code == 0
    with OpenAIServer([STRATEGY, finish_phase()]) as second:
        monkeypatch.setenv("OPENAI_BASE_URL", second.base_url)  # the plan still asks `first`

        failed = run("plan", "run", plan_id)
        assert failed.exit_code == 2, failed.stderr
        line = _one_line(failed.stderr)
        assert "the chat model's server did not answer" in line, line
        assert f"agents plan set-model {plan_id} --base-url URL" in line, line
        assert second.requests == []
        assert f"at {first.base_url} (the chat reasoner)" in run("plan", "show", plan_id).output

        moved = run("plan", "set-model", plan_id, "--base-url", second.base_url)
        assert moved.exit_code == 0, moved.output
        assert f"model: {MODEL} at {second.base_url}, from its next run on" in moved.output
        went_on = run("plan", "run", plan_id)
        assert went_on.exit_code == 0, went_on.stderr
        assert "waiting for: How?" in went_on.output  # the decision the new server made
        assert len(second.completions) == 1
    shown = json.loads(run("plan", "show", plan_id, "--format=json").output)
    assert (shown["model"], shown["model_base_url"]) == (MODEL, second.base_url)


def test_a_model_that_answers_in_words_is_replaced_with_set_model(
    run: Run, action: str, served: OpenAIServer
) -> None:
    """A model that answers twice in words, never with a tool call, ends the run with a line
    naming `plan set-model PLAN PROVIDER:MODEL`; after it, the run asks the other model and
    goes on. The line said "or pass tool_choice='any'", which nothing a user runs can do
    (the provider is already asked for it)."""
    started = run("plan", "use", action, "--model", MODEL, "--automation-profile", "manual")
    assert started.exit_code == 0, started.output  # at its first gate, no model asked yet
    plan_id = str(_plans(run)[0]["plan_id"])
    [gate] = json.loads(run("approval", "list", "--format=json").output)["approvals"]
    assert run("approval", "approve", gate["approval_id"]).exit_code == 0
    served.add(text("I would add a file."), text("Really, a file."))
    failed = run("plan", "run", plan_id)
    assert failed.exit_code == 2
    line = _one_line(failed.stderr)
    assert "the chat model answered twice without calling a tool" in line, line
    assert f"use a model that calls tools: agents plan set-model {plan_id} PROVIDER:MODEL" in line
    assert "tool_choice" not in line
    assert [r.body["tool_choice"] for r in served.completions] == ["required"] * 2, "asked"
    other = "openai:gpt-4.1-mini"
    assert run("plan", "set-model", plan_id, other).exit_code == 0
    served.add(STRATEGY)
    went_on = run("plan", "run", plan_id)
    assert went_on.exit_code == 0, went_on.stderr
    assert "waiting for: How?" in went_on.output
    assert served.completions[-1].body["model"] == "gpt-4.1-mini"


def test_a_model_the_server_does_not_have_names_set_model(
    run: Run, action: str, served: OpenAIServer
) -> None:
    """A 404 from the server (no model of that name) ends the run with the plan's own
    `set-model` command; it said "check the model's configuration, credentials and network"."""
    started = run("plan", "use", action, "--model", MODEL, "--automation-profile", "manual")
    assert started.exit_code == 0, started.output
    plan_id = str(_plans(run)[0]["plan_id"])
    [gate] = json.loads(run("approval", "list", "--format=json").output)["approvals"]
    assert run("approval", "approve", gate["approval_id"]).exit_code == 0
    served.add(http_error(404, "The model `gpt-4o-mini` does not exist", "model_not_found"))
    failed = run("plan", "run", plan_id)
    assert failed.exit_code == 2
    line = _one_line(failed.stderr)
    assert "does not exist" in line, line
    assert f"use a model the server has: agents plan set-model {plan_id} PROVIDER:MODEL" in line


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ((), "nothing to change: give the model (PROVIDER:MODEL), --base-url URL, or both"),
        (("--base-url", "ftp://x"), "is not an http(s) URL"),
        (("gpt-4o",), "is not PROVIDER:MODEL"),
    ],
)
def test_set_model_refuses_in_one_line_and_keeps_the_model(
    run: Run, action: str, served: OpenAIServer, args: tuple[str, ...], says: str
) -> None:
    assert (
        run("plan", "use", action, "--model", MODEL, "--automation-profile", "manual").exit_code
        == 0
    )
    plan_id = str(_plans(run)[0]["plan_id"])
    before = run("plan", "show", plan_id, "--format=json").output
    refused = run("plan", "set-model", plan_id, *args)
    assert refused.exit_code == 2
    assert says in _one_line(refused.stderr)
    assert run("plan", "show", plan_id, "--format=json").output == before


def test_set_model_refuses_a_scripted_plan(run: Run, action: str) -> None:
    assert run("plan", "use", action, "--automation-profile", "manual").exit_code == 0
    plan_id = str(_plans(run)[0]["plan_id"])
    refused = run("plan", "set-model", plan_id, MODEL)
    assert refused.exit_code == 2
    assert "runs with the scripted reasoner, which asks no model" in _one_line(refused.stderr)
