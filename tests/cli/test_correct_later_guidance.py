"""Guidance an earlier correction gave to a later decision, when an earlier decision is
reverted afterwards (issue 20, item 5): the restored actor state predates it. The preview
names it; guidance of a correction that stands is carried forward (the re-made decision
still follows it), guidance of one the revert supersedes is dropped, with a warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import Result

from tests.cli.conftest import Run

TEST = "A unit test, then the whole suite"
IMPLEMENT = "hello_cli/greet.py with a hello() function"
STRATEGY = "A plain function registered in COMMANDS"
EARLIER = "run the suite twice"


@pytest.fixture
def corrected_later(run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The demo plan at its Apply gate after a correction of its later `test` decision."""
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(tmp_path / "sandboxes"))
    plan_id = json.loads(run("demo", "--dir", str(tmp_path / "demo"), "--format=json").output)[
        "plan_id"
    ]
    first = _correct(run, _current(run, plan_id, TEST), EARLIER, "--yes")
    assert first.exit_code == 0, first.output
    return str(plan_id)


def _current(run: Run, plan_id: str, chosen: str) -> str:
    tree = json.loads(run("plan", "tree", plan_id, "--format=json").output)
    [found] = [d["decision_id"] for d in tree["decisions"] if d["chosen_option"] == chosen]
    return str(found)


def _correct(run: Run, decision: str, guidance: str, *extra: str) -> Result:
    return run(
        "plan",
        "correct",
        decision,
        "--mode=revert",
        "--guidance",
        guidance,
        "--choose",
        "1",
        *extra,
    )


def test_reverting_an_earlier_decision_carries_the_later_guidance_forward(
    run: Run, corrected_later: str
) -> None:
    implement = _current(run, corrected_later, IMPLEMENT)
    text = _correct(run, implement, "write it again", "--dry-run")
    assert text.exit_code == 0, text.output
    assert "guidance of earlier corrections carried forward (they stand)\n" in text.output
    assert f"'{EARLIER}' (step test, correction " in text.output
    doc = json.loads(
        _correct(run, implement, "write it again", "--dry-run", "--format=json").output
    )
    [carried] = doc["guidance_carried"]
    assert carried["text"] == EARLIER and carried["key"] == "test"
    assert doc["guidance_dropped"] == []

    done = _correct(run, implement, "write it again", "--yes")
    assert done.exit_code == 0, done.output
    remade = _current(run, corrected_later, TEST)
    explained = json.loads(run("plan", "explain", remade, "--format=json").output)["decision"]
    assert EARLIER in explained["actor_reasoning"]  # the re-made test still follows it


def test_a_revert_that_supersedes_the_earlier_correction_names_the_guidance_it_drops(
    run: Run, corrected_later: str
) -> None:
    strategy = _current(run, corrected_later, STRATEGY)
    text = _correct(run, strategy, "use a greeter class", "--dry-run")
    assert text.exit_code == 0, text.output
    assert "guidance of earlier corrections dropped (the revert supersedes them)\n" in text.output
    assert "WARNING: This revert drops guidance that earlier corrections gave" in text.output
    assert f"'{EARLIER}' (step test, correction " in text.output
    doc = json.loads(
        _correct(run, strategy, "use a greeter class", "--dry-run", "--format=json").output
    )
    assert [g["text"] for g in doc["guidance_dropped"]] == [EARLIER]
    assert any("drops guidance" in w for w in doc["warnings"])
