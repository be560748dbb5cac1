"""``core.model-timeout``: a model that takes the request and never answers stops the plan
after the seconds set, not the provider's ten minutes (three times over, with its retries).

The model is real (``ChatOpenAI`` through ``init_chat_model``) and asks the
OpenAI-compatible test server on 127.0.0.1, whose answers are held until the test lets
them go.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest

from tests.cli.conftest import Run
from tests.cli.test_chat_model_choice import MODEL, STRATEGY, _one_line, _plans
from tests.cli.test_chat_model_choice import action as action  # the fixtures
from tests.cli.test_chat_model_choice import served as served
from tests.support.openai_server import OpenAIServer, finish_phase, held
from tests.support.openai_server import openai_server as openai_server

pytest.importorskip("langchain_openai")


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Lets held answers go when the test ends (they are answered to a closed request)."""
    event = threading.Event()
    yield event
    event.set()


def test_a_model_that_never_answers_stops_the_plan_after_the_timeout_set(
    run: Run, action: str, served: OpenAIServer, release: threading.Event
) -> None:
    """Each request is given up after the second set; the client's own retries time out
    too; the plan is errored with a line that says so and how to wait longer; with a longer
    timeout, `plan run` goes on from where it stopped."""
    assert run("config", "set", "core.model-timeout", "1").exit_code == 0
    asked = threading.Event()
    served.add(*(held(STRATEGY, asked, release) for _ in range(5)))

    stopped = run("plan", "use", action, "--model", MODEL, "--automation-profile", "auto")

    assert stopped.exit_code == 2, stopped.output
    line = _one_line(stopped.stderr)
    assert "the chat model gave no answer in time (OpenAITimeoutError" in line, line
    assert "agents config set core.model-timeout SECONDS" in line, line
    (plan,) = _plans(run)
    plan_id = str(plan["plan_id"])
    assert f"agents plan run {plan_id}" in line, line
    assert plan["state"] == "errored"
    asks = len(served.completions)
    assert asks >= 1 and served.pending == 5 - asks  # each held answer was given up on

    assert run("config", "set", "core.model-timeout", "300").exit_code == 0
    served.drop_pending()  # the held answers nobody waits for any more
    served.add(STRATEGY, finish_phase(), finish_phase())
    went_on = run("plan", "run", plan_id)

    assert went_on.exit_code == 0, went_on.output
    shown = json.loads(run("plan", "show", plan_id, "--format=json").output)
    assert shown["plan"]["state"] != "errored"
    tree = json.loads(run("plan", "tree", plan_id, "--format=json").output)
    assert "step by step" in [d["chosen_option"] for d in tree["decisions"]]
