"""A whole plan decided by a real chat model client, from the CLI, then corrected and replayed.

``agents plan use ACTION --reasoner chat --model openai:gpt-4o-mini`` builds the model with
LangChain's ``init_chat_model`` — ``langchain-openai``'s ``ChatOpenAI`` and the ``openai``
client over HTTP — and talks to the OpenAI-compatible server of tests/support (scripted
tool calls and usage figures, every request recorded). Nothing of LangChain is mocked.

Each command runs in its own process, as at a shell. The correction runs in a process
whose ``OPENAI_BASE_URL`` points elsewhere: the plan kept its model and server, so the
replay still asks the same model, which gets the user's guidance and whose new decision is the one the tree
holds and the Apply lands.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.store.store import Store
from tests.support.cli_output import heading_plan_id
from tests.support.openai_server import (
    OpenAIServer,
    Reply,
    Request,
    Usage,
    finish_phase,
    http_error,
    record_decision,
)
from tests.support.openai_server import openai_server as openai_server  # the fixture

pytest.importorskip("langchain_openai")

ACTION = {
    "name": "local/readme",
    "prompt": "Write a README for the project",
    "resources": ["local/docs"],
    "tools": ["local/write-file"],
}
GUIDANCE = "add a Usage section that shows the install command"


def _write(content: str) -> dict[str, Any]:
    return {
        "tool": "local/write-file",
        "arguments": {"resource": "local/docs", "path": "README.md", "content": content},
    }


LAYOUT = record_decision(
    key="layout",
    decision_type="strategy_choice",
    question="How is the documentation laid out?",
    chosen_option="one README at the top",
    alternatives=["a docs folder"],
    confidence=0.8,
    rationale="a small project",
    content="A single README is enough here.",
    usage=Usage(prompt_tokens=812, completion_tokens=64),
)
WRITE = record_decision(
    key="write",
    decision_type="implementation_choice",
    question="What does the README say?",
    chosen_option="a one-line README",
    alternatives=["a README with a Usage section"],
    parent_key="layout",
    depends_on=["layout"],
    confidence=0.7,
    tool_calls=[_write("# readme\n")],
)


def _rewrite(request: Request) -> Reply:
    """The model follows the guidance it was sent (and says so if it was not sent)."""
    if GUIDANCE not in request.text:
        return http_error(400, "the replay's request did not carry the user's guidance")
    return record_decision(
        key="write",
        decision_type="implementation_choice",
        question="What does the README say?",
        chosen_option="a README with a Usage section",
        alternatives=["a one-line README"],
        parent_key="layout",
        depends_on=["layout"],
        confidence=0.9,
        tool_calls=[_write("# readme\n\n## Usage\n\n    pip install readme\n")],
    )


class Cli:
    """``agents --db URL ...`` in a new process each call, with its own home."""

    def __init__(self, db_url: str, home: Path, server: OpenAIServer) -> None:
        self.db_url = db_url
        self.home = home
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")},
            **server.env(),
            "HOME": str(home),
            "AGENTS_SANDBOX_DIR": str(home / "sandboxes"),
        }

    def __call__(
        self, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cleveragents_tui", "--db", self.db_url, *args],
            capture_output=True,
            text=True,
            env={**self.env, **(env or {})},
            check=False,
            timeout=300,
        )

    def use_readme(self) -> subprocess.CompletedProcess[str]:
        """`agents plan use` of the README action with the chat reasoner, profile auto."""
        action = self.home / "readme.action.yaml"
        action.write_text(yaml.safe_dump(ACTION))
        return self(
            "plan", "use", str(action), "--reasoner", "chat", "--model", "openai:gpt-4o-mini",
            "--automation-profile", "auto",
        )  # fmt: skip

    def tree(self, plan_id: str) -> dict[str, dict[str, Any]]:
        """The plan's decisions by type; a superseded one under ``superseded <type>``."""
        shown = self("plan", "tree", plan_id, "--show-superseded", "--format=json")
        assert shown.returncode == 0, shown.stderr
        found = {}
        for d in json.loads(shown.stdout)["decisions"]:
            kind = d["decision_type"]
            found[kind if d["superseded_by"] is None else f"superseded {kind}"] = d
        return found


@pytest.fixture
def docs(sqlite_store: Store, tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "README.md").write_text("old\n")
    with sqlite_store.unit_of_work(write=True) as uow:
        uow.resources.add(
            Resource(
                resource_id="local/docs",
                kind="filesystem",
                location=str(folder),
                sandbox_strategy="filesystem_copy",
            )
        )
        uow.commit()
    return folder


def test_a_chat_model_runs_a_plan_and_remakes_the_corrected_decision(
    openai_server: OpenAIServer, docs: Path, sqlite_url: str, tmp_path: Path
) -> None:
    cli = Cli(sqlite_url, tmp_path, openai_server)
    openai_server.add(LAYOUT, finish_phase(), WRITE, finish_phase())
    started = cli.use_readme()
    assert started.returncode == 0, started.stderr
    plan_id = heading_plan_id(started.stdout)
    assert openai_server.pending == 0
    sent = openai_server.completions
    assert len(sent) == 4  # two decisions, two phase ends: nothing asked twice
    assert {r.body["model"] for r in sent} == {"gpt-4o-mini"}
    assert {r.authorization for r in sent} == {f"Bearer {openai_server.env()['OPENAI_API_KEY']}"}
    assert sent[0].tool_names == ["record_decision", "finish_phase"]
    # what the run cost is said at its end: LAYOUT's 876 tokens and 120 for each other call
    used = "  used so far: 1,236 tokens in 4 model calls · $0.000000 · 1 tool call (4 unpriced"
    assert used in started.stdout, started.stdout
    assert "Write a README for the project" in sent[0].text
    # the plan's resource, with what it is: the model is not left to guess the id
    assert "- local/docs (a folder: files (list-files, read-file" in sent[0].text
    assert "local/write-file" in json.dumps(sent[2].body["tools"])  # Execute offers the tool
    # ... and tells the model its arguments, so a real model can call it right the first time
    assert '"required":["resource","path","content"]' in sent[2].text
    tree = cli.tree(plan_id)
    assert tree["strategy_choice"]["chosen_option"] == "one README at the top"
    assert tree["implementation_choice"]["chosen_option"] == "a one-line README"
    assert (docs / "README.md").read_text() == "old\n"  # nothing lands before Apply

    # A later process whose OPENAI_BASE_URL points nowhere (a closed loopback port): the
    # plan kept its model and its server, so the replay asks the same one.
    openai_server.add(_rewrite, finish_phase())
    corrected = cli(
        "plan", "correct", tree["implementation_choice"]["decision_id"], "--mode=revert",
        "--guidance", GUIDANCE, "--yes",
        env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"},
    )  # fmt: skip
    assert corrected.returncode == 0, corrected.stderr + corrected.stdout
    assert openai_server.pending == 0
    replayed = openai_server.completions[4]
    assert "CORRECTION FROM THE USER" in replayed.text
    assert GUIDANCE in replayed.text
    assert replayed.body["model"] == "gpt-4o-mini"

    tree = cli.tree(plan_id)
    assert tree["implementation_choice"]["chosen_option"] == "a README with a Usage section"
    assert tree["implementation_choice"]["is_correction"] is True
    assert (
        tree["strategy_choice"]["chosen_option"] == "one README at the top"
    )  # kept, not asked again
    assert tree["superseded implementation_choice"]["chosen_option"] == "a one-line README"

    applied = cli("plan", "apply", plan_id)
    assert applied.returncode == 0, applied.stderr
    assert (docs / "README.md").read_text() == "# readme\n\n## Usage\n\n    pip install readme\n"
    assert len(openai_server.completions) == 6  # the Apply asks no model


def test_a_failed_model_call_ends_the_plan_errored_and_plan_run_goes_on(
    openai_server: OpenAIServer, docs: Path, sqlite_url: str, tmp_path: Path
) -> None:
    """The model refuses the first call (a bad key): the command says so on one line with
    the way on, the plan is recorded errored with the reason — not left ``running`` with
    no process, which `agents doctor` would flag — and `agents plan run` goes on once the
    model answers, making the decisions the plan was missing."""
    cli = Cli(sqlite_url, tmp_path, openai_server)
    openai_server.add(http_error(401, "Incorrect API key provided"))
    started = cli.use_readme()
    assert started.returncode == 2, started.stdout + started.stderr
    said = started.stderr.strip().splitlines()
    assert len(said) == 1 and "Traceback" not in started.stderr, started.stderr
    assert "the chat model call failed" in said[0] and "Incorrect API key" in said[0]
    assert "the provider refused the API key: set a valid one (OPENAI_API_KEY" in said[0]
    (plan,) = json.loads(cli("--format=json", "plan", "list").stdout)["plans"]
    plan_id = plan["plan_id"]
    assert f"then run it again: agents plan run {plan_id}" in said[0]
    assert plan["state"] == "errored"
    shown = cli("plan", "show", plan_id)
    assert "Incorrect API key" in shown.stdout, shown.stdout
    doctor = cli("doctor")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr  # nothing left running

    openai_server.add(LAYOUT, finish_phase(), WRITE, finish_phase())
    went_on = cli("plan", "run", plan_id)
    assert went_on.returncode == 0, went_on.stderr
    assert openai_server.pending == 0
    tree = cli.tree(plan_id)
    assert tree["strategy_choice"]["chosen_option"] == "one README at the top"
    assert tree["implementation_choice"]["chosen_option"] == "a one-line README"


def test_a_correction_whose_replay_failed_shows_why_on_the_plans_error_line(
    openai_server: OpenAIServer, docs: Path, sqlite_url: str, tmp_path: Path
) -> None:
    """Before: `plan show` of a plan a failed replay left errored had no `error` line (nor
    JSON `error`), unlike a plan whose own run's model call failed."""
    cli = Cli(sqlite_url, tmp_path, openai_server)
    openai_server.add(LAYOUT, finish_phase(), WRITE, finish_phase())
    started = cli.use_readme()
    plan_id = heading_plan_id(started.stdout)
    write = cli.tree(plan_id)["implementation_choice"]["decision_id"]

    openai_server.add(http_error(401, "Incorrect API key provided"))
    corrected = cli("plan", "correct", write, "--mode=revert", "--guidance", GUIDANCE, "--yes")
    assert "correction" in corrected.stdout and ": failed" in corrected.stdout, corrected.stdout
    assert corrected.stdout.count(f"agents plan run {plan_id}") == 1, corrected.stdout  # once
    [correction] = json.loads(cli("plan", "show", plan_id, "--format=json").stdout)["corrections"]
    shown = json.loads(cli("plan", "show", plan_id, "--format=json").stdout)
    assert shown["plan"]["state"] == "errored"
    assert shown["error"] == (
        f"the replay of correction {correction['correction_id']} failed: the chat model call "
        "failed: OpenAIAuthenticationError: Error code: 401 - Incorrect API key provided: "
        "the provider refused the API key: set a valid one (OPENAI_API_KEY, "
        "ANTHROPIC_API_KEY, ...) where the plan runs"
    )
    text = cli("plan", "show", plan_id).stdout
    assert f"error        {shown['error']}\n" in text
    listed = next(
        line for line in text.splitlines() if line.startswith(f"  {correction['correction_id']}  ")
    )
    # the corrections list says why, as the error line does
    assert " · failed · attempt 2 · by " in listed
    assert f": its replay failed: plan {plan_id} errored: the chat model call " in listed
    assert "OpenAIAuthenticationError" in listed

    openai_server.add(_rewrite, finish_phase())
    went_on = cli("plan", "run", plan_id)
    assert went_on.returncode == 0, went_on.stderr
    again = json.loads(cli("plan", "show", plan_id, "--format=json").stdout)
    assert (again["plan"]["state"], again["error"]) == ("awaiting_approval", None)
    text = cli("plan", "show", plan_id).stdout
    listed = next(
        line for line in text.splitlines() if line.startswith(f"  {correction['correction_id']}  ")
    )
    assert listed.endswith("; the plan went on after it (plan run)"), listed  # not stuck


def test_a_rate_limited_model_call_says_to_wait_then_run_the_plan(
    openai_server: OpenAIServer, docs: Path, sqlite_url: str, tmp_path: Path
) -> None:
    """Before: a 429 (``openai.RateLimitError``, once the client's own retries were spent)
    said "check the model's configuration, credentials and network", none of which was
    wrong. Now it says to wait, then `agents plan run P`; other errors keep that hint."""
    cli = Cli(sqlite_url, tmp_path, openai_server)
    openai_server.add(*[http_error(429, "Rate limit reached for gpt-4o-mini")] * 3)
    started = cli.use_readme()

    assert started.returncode == 2, started.stdout + started.stderr
    assert openai_server.pending == 0  # the client retried twice before giving up
    (plan,) = json.loads(cli("--format=json", "plan", "list").stdout)["plans"]
    plan_id = plan["plan_id"]
    reason = (
        "the chat model call failed: OpenAIRateLimitError: Error code: 429 - Rate limit "
        "reached for gpt-4o-mini: the provider is limiting calls to the model: wait for the "
        "limit to reset (or check the account's quota)"
    )
    assert started.stderr.strip() == (
        f"error: plan {plan_id} errored: {reason}: then run it again: agents plan run {plan_id}"
    )
    assert json.loads(cli("plan", "show", plan_id, "--format=json").stdout)["error"] == reason

    openai_server.add(LAYOUT, finish_phase(), WRITE, finish_phase())
    went_on = cli("plan", "run", plan_id)
    assert went_on.returncode == 0, went_on.stderr


def test_a_spent_quota_says_to_add_credit_not_to_wait(
    openai_server: OpenAIServer, docs: Path, sqlite_url: str, tmp_path: Path
) -> None:
    """Before: OpenAI's 429 with code ``insufficient_quota`` (the account's credit is
    spent) got the rate limit's "wait for the limit to reset", which never helps."""
    cli = Cli(sqlite_url, tmp_path, openai_server)
    spent = "You exceeded your current quota, please check your plan and billing details"
    openai_server.add(*[http_error(429, spent, code="insufficient_quota")] * 3)
    started = cli.use_readme()

    assert started.returncode == 2, started.stdout + started.stderr
    assert "wait" not in started.stderr, started.stderr
    assert started.stderr.strip().endswith(
        f"{spent}: the account has no credit left for this model: add credit in the "
        "provider's billing settings: then run it again: agents plan run "
        + json.loads(cli("--format=json", "plan", "list").stdout)["plans"][0]["plan_id"]
    ), started.stderr
