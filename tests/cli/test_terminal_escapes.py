"""Text from users, agents and files never reaches the terminal as an escape sequence
(issue 21, item 3): every command shows control characters escaped, and JSON carries them
as ``\\uXXXX`` escapes that decode back to the same text."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from cleveragents_tui.engine.demo.demo_data import SAMPLE_PLAN, load_sample_plan
from cleveragents_tui.resources import data_path
from cleveragents_tui.store.store import Store
from tests.cli.conftest import Run

# Clipboard write, clear screen, window title, a one-byte C1 CSI, a bidi override.
HOSTILE = "\x1b]52;c;cHduZWQ=\x07 \x1b[2J \x1b]0;pwned\x07 \x9b31m \u202e"
RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def assert_clean(output: str) -> None:
    raw = RAW.findall(output)
    assert not raw, f"raw control characters reached the terminal: {raw!r}"


def _poison(spec: dict[str, Any]) -> None:
    spec["plan"]["title"] += HOSTILE
    for d in spec["decisions"]:
        for key in ("question", "chosen", "rationale", "correction_reason"):
            if key in d:
                d[key] += HOSTILE
        d["alternatives"] = [a + HOSTILE for a in d.get("alternatives", [])]
    for c in spec.get("corrections", []):
        c["guidance"] += HOSTILE


@pytest.fixture
def hostile_plan(tmp_path: Path) -> dict[str, Any]:
    """The sample plan with every free-text field ending in escape sequences."""
    spec = yaml.safe_load(data_path(*SAMPLE_PLAN).read_text("utf-8"))
    _poison(spec)
    source = tmp_path / "hostile.yaml"
    source.write_text(yaml.safe_dump(spec, allow_unicode=True), "utf-8")
    store = Store.open(str(tmp_path / "agents.db"))
    try:
        plan_id = load_sample_plan(store, source)
    finally:
        store.close()
    return {"plan": plan_id}


def test_read_commands_show_every_field_escaped(run: Run, hostile_plan: dict[str, Any]) -> None:
    plan_id = hostile_plan["plan"]
    tree_json = run("plan", "tree", plan_id, "--show-superseded", "--format=json").output
    assert_clean(tree_json)
    decisions = json.loads(tree_json)["decisions"]
    # JSON escapes, and decoding gives back the very text that was recorded.
    assert any(d["chosen_option"].endswith(HOSTILE) for d in decisions)
    outputs = [
        run("plan", "tree", plan_id, "--show-superseded").output,
        run("plan", "show", plan_id).output,
        run("plan", "show", plan_id, "--format=json").output,
        run("plan", "list").output,
        run("plan", "list", "--format=json").output,
    ]
    for d in decisions:
        outputs.append(run("plan", "explain", d["decision_id"]).output)
        explained = run("plan", "explain", d["decision_id"], "--format=json").output
        assert_clean(explained)
        json.loads(explained)
    for output in outputs:
        assert_clean(output)
    tree = outputs[0]
    assert "\\x1b]52;c;cHduZWQ=\\x07" in tree  # shown, visibly, as an escape
    assert "\\x9b31m" in tree and "\\u202e" in tree
    assert "\\x1b]0;pwned\\x07" in outputs[1]  # the plan's title


def test_errors_echo_hostile_ids_escaped_and_cut(run: Run, hostile_plan: dict[str, Any]) -> None:
    result = run("plan", "explain", "0" * 5 + HOSTILE + "A" * 100_000)
    assert result.exit_code == 2
    assert_clean(result.output)
    assert len(result.output.splitlines()) == 1 and len(result.output) < 400


@pytest.fixture
def demo_plan(run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(tmp_path / "sandboxes"))
    doc = json.loads(run("demo", "--dir", str(tmp_path / "demo"), "--format=json").output)
    tree = json.loads(run("plan", "tree", doc["plan_id"], "--format=json").output)
    keys = {d["chosen_option"]: d["decision_id"] for d in tree["decisions"]}
    return {"plan": doc["plan_id"], "record": keys["A row in the releases table"]}


def test_correction_preview_and_approvals_show_guidance_escaped(
    run: Run, demo_plan: dict[str, str]
) -> None:
    correct = ("plan", "correct", demo_plan["record"], "--mode=revert", "--guidance")
    text = run(*correct, "rc1" + HOSTILE + "\nsecond line", "--dry-run")
    assert text.exit_code == 0, text.output
    assert_clean(text.output)
    assert "rc1\\x1b]52;c;cHduZWQ=\\x07" in text.output
    as_json = run(*correct, "rc1" + HOSTILE, "--dry-run", "--format=json")
    assert as_json.exit_code == 0, as_json.output
    assert_clean(as_json.output)
    assert json.loads(as_json.output)["guidance"] == "rc1" + HOSTILE
    for args in (("approval", "list"), ("approval", "list", "--format=json")):
        result = run(*args)
        assert result.exit_code == 0, result.output
        assert_clean(result.output)
