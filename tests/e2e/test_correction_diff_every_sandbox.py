"""A correction's diff shows the real change on every strategy with files (issue 14).

`agents plan diff --correction` on a revert of the decision that wrote a page: the page as
the old attempt wrote it against the page the replay wrote, in both comparisons, whatever
the resource's sandbox — a git worktree, a folder copy, an overlay — and also for a
Strategize revert of the phase-level tier, whose sandboxes without checkpoints are made anew
from the real resource.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cleveragents_tui.cli import cli
from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.enums import Phase, PlanState
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.store.store import Store
from tests.support.flag_profiles import register_profile

SITE = "local/site"
STRATEGIES = ["git_worktree", "filesystem_copy", "overlay"]


def write(path: str, content: str) -> dict[str, Any]:
    return {
        "tool": "local/write-file",
        "arguments": {"resource": SITE, "path": path, "content": content},
    }


def action() -> Action:
    """A strategy (plain or fancy), a page written as the strategy says, then a footer."""
    return Action.model_validate(
        {
            "name": "local/site",
            "prompt": "make a page",
            "resources": [SITE],
            "decisions": [
                {
                    "key": "strategy",
                    "type": "strategy_choice",
                    "question": "Which style?",
                    "alternatives": [
                        {"option": "a plain style", "match": ["plain style"]},
                        {"option": "a fancy style", "match": ["fancy style"]},
                    ],
                },
                {
                    "key": "page",
                    "type": "implementation_choice",
                    "question": "Which page?",
                    "depends_on": ["strategy"],
                    "alternatives": [
                        {
                            "option": "a plain page",
                            "match": ["plain page"],
                            "tool_calls": [write("index.html", "<p>plain</p>\n")],
                        },
                        {
                            "option": "a fancy page",
                            "match": ["fancy"],
                            "tool_calls": [write("index.html", "<p>fancy</p>\n")],
                        },
                    ],
                },
                {
                    "key": "footer",
                    "type": "tool_invocation",
                    "question": "A footer?",
                    "alternatives": [
                        {"option": "a footer", "tool_calls": [write("footer.txt", "bye\n")]}
                    ],
                },
            ],
        }
    )


def register(store: Store, tmp_path: Path, strategy: str, *, checkpoints: bool = True) -> None:
    real = tmp_path / "site"
    real.mkdir()
    (real / "README.md").write_text("site\n")
    if strategy == "git_worktree":
        for args in (
            ("init", "-q", "-b", "main"),
            ("config", "user.email", "t@example.invalid"),
            ("config", "user.name", "Test"),
            ("add", "-A"),
            ("commit", "-q", "-m", "initial"),
        ):
            subprocess.run(["git", "-C", str(real), *args], check=True, capture_output=True)
    with store.unit_of_work(write=True) as uow:
        uow.resources.add(
            Resource(
                resource_id=SITE,
                kind="git" if strategy == "git_worktree" else "filesystem",
                location=str(real),
                sandbox_strategy=strategy,
                checkpoint_enabled=checkpoints,
            )
        )
        uow.commit()


@pytest.fixture
def options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RunOptions:
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(tmp_path / "sandboxes"))
    return RunOptions(sandbox_base=tmp_path / "sandboxes")


def at_apply_gate(store: Store, options: RunOptions, profile: str = "auto") -> dict[str, str]:
    plan = start_plan(store, action(), profile_override=profile, options=options)
    assert (plan.phase, plan.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
    with store.unit_of_work() as uow:
        return {
            d.step_key: d.decision_id
            for d in uow.decisions.for_plan(plan.plan_id, include_superseded=False)
            if d.step_key
        }


def agents(url: str, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--db", url, *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def corrected(url: str, decision_id: str, guidance: str) -> str:
    """`plan correct --yes`; the correction's diff as `plan diff --correction` prints it."""
    out = agents(
        url, "plan", "correct", decision_id, "--mode=revert", "--guidance", guidance, "--yes"
    )
    assert ": succeeded (attempt" in out, out
    correction = out.split("compare the attempts: agents plan diff --correction ")[1].strip()
    return agents(url, "plan", "diff", "--correction", correction)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_revert_diff_shows_the_page_each_attempt_wrote(
    tmp_path: Path, sqlite_store: Store, sqlite_url: str, options: RunOptions, strategy: str
) -> None:
    register(sqlite_store, tmp_path, strategy)
    keys = at_apply_gate(sqlite_store, options)
    shown = corrected(sqlite_url, keys["page"], "make it fancy")
    # at the corrected decision and in the final states: the page, and nothing else
    assert shown.count("-<p>plain</p>") == 2, shown
    assert shown.count("+<p>fancy</p>") == 2, shown
    assert "footer.txt" not in shown
    assert "README.md" not in shown


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_phase_level_revert_diff_shows_the_change_in_a_sandbox_made_anew(
    tmp_path: Path, sqlite_store: Store, sqlite_url: str, options: RunOptions, strategy: str
) -> None:
    # Given a resource without checkpoints: a Strategize revert makes its sandbox anew
    register(sqlite_store, tmp_path, strategy, checkpoints=False)
    profile = register_profile(
        sqlite_store, "no-checkpoints", base="auto", safety={"require_checkpoints": False}
    ).name
    keys = at_apply_gate(sqlite_store, options, profile)
    # When the strategy is reverted and the replay writes the fancy page
    shown = corrected(sqlite_url, keys["strategy"], "a fancy style, and a fancy page")
    # Then the final states compare the old sandbox's page with the new one's
    assert "-<p>plain</p>" in shown, shown
    assert "+<p>fancy</p>" in shown, shown
    assert "made anew" not in shown
    assert "footer.txt" not in shown  # written the same in both attempts
