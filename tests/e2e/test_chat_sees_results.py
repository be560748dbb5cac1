"""A chat model is sent what its calls returned: a file it read, a test run's output.

Through the real client stack (``ChatOpenAI`` over HTTP to the local server): the model
reads a file in one decision and edits it in the next, as a coding agent reads before it
writes. Before, its calls' results never reached it: a read was wasted and an edit of code
it had not seen was a guess. A correction rewinds what it was sent with the decisions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_openai")

from cleveragents_tui.domain.enums import CorrectionMode, PlanState
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.store.store import Store
from tests.e2e.test_corrections import decisions_by_key
from tests.support.chat_plans import RESOURCE, chat_options, edit, run_chat_plan, write
from tests.support.openai_server import (
    OpenAIServer,
    Reply,
    finish_phase,
    record_decision,
)
from tests.support.openai_server import openai_server as openai_server  # the fixture

GREETING = 'GREETING = "Hello"  # the one line to change\n'
READ = {"tool": "local/read-file", "arguments": {"resource": RESOURCE, "path": "greet.py"}}


def _strategy() -> list[Reply]:
    return [
        record_decision(
            key="design",
            decision_type="strategy_choice",
            question="How is the greeting changed?",
            chosen_option="read greet.py, then edit its line",
            confidence=0.9,
        ),
        finish_phase(),
    ]


def _step(
    key: str, *calls: dict[str, Any], depends: str = "design", parent: str = "design"
) -> Reply:
    return record_decision(
        key=key,
        decision_type="implementation_choice",
        question=f"Step {key}",
        chosen_option=f"do {key}",
        parent_key=parent,
        depends_on=[depends],
        confidence=0.9,
        tool_calls=list(calls),
    )


def test_the_model_is_sent_the_file_it_read_before_its_next_decision(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.add(
        *_strategy(),
        _step("seed", write("greet.py", GREETING)),
        _step("read", READ, depends="seed"),
        _step("edit", edit("greet.py", '"Hello"', '"Hi"'), depends="read"),
        finish_phase(),
    )
    store = Store.open(str(tmp_path / "plan.db"))

    plan, folder = run_chat_plan(store, openai_server, tmp_path, "greet", "Make it say Hi")

    assert plan.state is PlanState.APPLIED
    before_read, after_read, after_edit = (c.text for c in openai_server.completions[3:6])
    assert "result of read" not in before_read
    said = after_read.split("## Your notes so far")[1]
    assert (
        'result of read call 1: local/read-file {"path":"greet.py","resource":"local/calc"}: ok'
        in said
    )
    assert "<output>\n" + GREETING.strip() + "\n</output>" in said  # as data, fenced
    assert "result of edit call 1: local/edit-file" in after_edit
    assert (folder / "greet.py").read_text() == GREETING.replace("Hello", "Hi")


def test_a_correction_rewinds_what_the_model_was_sent_with_the_decisions(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    """Correcting the seed rolls greet.py back, so the later read, which depends on nothing
    the correction changed, is re-made too (it read the erased file): the replay's model
    reads the new file, and is no longer sent what the superseded read returned."""
    openai_server.add(
        *_strategy(),
        _step("seed", write("greet.py", GREETING)),
        _step("read", READ),
        finish_phase(),
    )
    store = Store.open(str(tmp_path / "plan.db"))
    plan, _ = run_chat_plan(store, openai_server, tmp_path, "greet", "Make it say Hi", "auto")
    assert plan.state is PlanState.AWAITING_APPROVAL

    seed = decisions_by_key(store, plan.plan_id)["seed"]
    openai_server.add(
        _step("seed", write("greet.py", 'GREETING = "Hey"\n')),
        _step("read", READ),
        finish_phase(),
    )
    impact = preview(store, seed, CorrectionMode.REVERT, "greet with Hey")
    assert [r.step_key for r in impact.remade] == ["read"]
    execute(
        store,
        impact,
        acknowledged=True,
        requested_by="ana",
        options=chat_options(tmp_path, "greet", openai_server),
    )

    after_read = openai_server.completions[-1].text.split("## Your notes so far")[1]
    assert 'GREETING = "Hey"' in after_read
    assert "the one line to change" not in after_read


def test_the_strategy_actor_reads_before_it_decides_and_nothing_else_runs(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    """Strategize is read-only: the model is offered only the tools that read, its reads
    run, and what they returned reaches its next turn."""
    folder = tmp_path / "greet"
    openai_server.add(
        record_decision(
            key="look",
            decision_type="strategy_choice",
            question="What does greet.py hold?",
            chosen_option="read it first",
            confidence=0.9,
            tool_calls=[READ],
        ),
        finish_phase(),
        _step("edit", edit("greet.py", '"Hello"', '"Hi"'), depends="look", parent="look"),
        finish_phase(),
    )
    store = Store.open(str(tmp_path / "plan.db"))
    folder.mkdir()
    (folder / "greet.py").write_text(GREETING)

    plan, _ = run_chat_plan(store, openai_server, tmp_path, "greet", "Make it say Hi")

    assert plan.state is PlanState.APPLIED
    first, after_read = openai_server.completions[0], openai_server.completions[1]
    assert first.tool_names == ["record_decision", "finish_phase"]
    offered = first.text.split("## Tools your decisions may call")[1].split("##")[0]
    assert "local/read-file" in offered
    assert "local/run-tests" not in offered and "local/write-file" not in offered
    assert "<output>\n" + GREETING.strip() + "\n</output>" in after_read.text
    assert (folder / "greet.py").read_text() == GREETING.replace("Hello", "Hi")


def test_the_strategy_lists_and_searches_the_project_and_the_model_is_sent_both(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    """A model in a project it has not seen lists it and searches it first (in Strategize,
    which reads): the listing and the matching lines reach its next turn, so it can name
    the files to read and change."""
    folder = tmp_path / "listed"
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "greet.py").write_text(GREETING)
    (folder / "README.md").write_text("# listed\n")
    listing = {"tool": "local/list-files", "arguments": {"resource": RESOURCE}}
    search = {"tool": "local/search-files", "arguments": {"resource": RESOURCE, "text": "Hello"}}
    openai_server.add(
        record_decision(
            key="design",
            decision_type="strategy_choice",
            question="Where is the greeting?",
            chosen_option="list the project, find the greeting, then edit it",
            confidence=0.9,
            tool_calls=[listing, search],
        ),
        finish_phase(),
        _step("edit", edit("src/greet.py", '"Hello"', '"Hi"')),
        finish_phase(),
    )
    store = Store.open(str(tmp_path / "plan.db"))
    tools = ("local/list-files", "local/search-files", "local/read-file", "local/edit-file")

    plan, _ = run_chat_plan(store, openai_server, tmp_path, "listed", "Say Hi", tools=tools)

    assert plan.state is PlanState.APPLIED
    assert "- local/list-files (read;" in openai_server.completions[0].text  # offered
    after = openai_server.completions[1].text  # the strategy's next turn
    assert 'result of design call 1: local/list-files {"resource":"local/calc"}: ok' in after
    assert "3 entries in the resource (folders end with /):" in after
    assert f"src/greet.py  {len(GREETING)} bytes" in after and "README.md  9 bytes" in after
    assert "- local/search-files (read;" in openai_server.completions[0].text
    assert "result of design call 2: local/search-files" in after
    assert "1 match in 1 file (2 files searched)" in after
    assert f"src/greet.py:1: {GREETING.strip()}" in after
    assert (folder / "src" / "greet.py").read_text() == GREETING.replace('"Hello"', '"Hi"')
