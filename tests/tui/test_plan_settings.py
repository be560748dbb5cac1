"""The plan's profile (`p`) and chat model (`m`) changed from the app, as `agents plan
set-profile` and `plan set-model` change them: a model error of a run names set-model, and
the app is where the plan goes on, without leaving it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from textual.pilot import Pilot
from textual.widgets import Input, OptionList

from cleveragents_tui.automation.profiles import ProfileRegistry
from cleveragents_tui.cli import cli
from cleveragents_tui.engine.core.reasoner_choice import ModelChoice, for_plan
from cleveragents_tui.engine.read.browse import show_plan
from cleveragents_tui.engine.run.approvals import pending_approvals
from cleveragents_tui.engine.run.runner import RunOptions
from cleveragents_tui.store.store import Store
from cleveragents_tui.tui.app import AgentsApp
from cleveragents_tui.tui.modals.model import ModelModal
from cleveragents_tui.tui.modals.pick import PickModal
from cleveragents_tui.tui.widgets.status_bar import PlanStatus
from tests.cli.test_chat_model_choice import MODEL, STRATEGY  # the model and its first reply
from tests.support.openai_server import OpenAIServer, finish_phase
from tests.tui.conftest import SIZE, DemoPlan, settle

pytestmark = pytest.mark.anyio


async def _opened(app: AgentsApp, pilot: Pilot[None], key: str) -> None:
    """Press ``key``, then let the app run until its dialog is up or a notification says why
    not (the dialog's worker waits for its answer: settle would wait for ever)."""
    await pilot.press(key)
    for _ in range(200):
        if isinstance(app.screen, PickModal | ModelModal) or app._notifications:
            return
        await pilot.pause(0.01)
    raise AssertionError(f"{key} opened nothing and said nothing")


async def test_p_picks_the_plans_profile_from_its_next_step_on(demo_plan: DemoPlan) -> None:
    plan_id = demo_plan.plan.plan_id
    names = ProfileRegistry(demo_plan.store).names()
    app = demo_plan.app(plan_id=plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await _opened(app, pilot, "p")
        assert isinstance(app.screen, PickModal)
        listed = app.screen.query_one(OptionList)
        assert listed.highlighted == names.index("auto")  # the plan's own, to start from
        steps = names.index("cautious") - names.index("auto")
        for _ in range(abs(steps)):
            await pilot.press("down" if steps > 0 else "up")
        await pilot.press("enter")
        await settle(app, pilot)
        status = app.screen.query_one(PlanStatus).render_line(0).text
        assert "profile cautious" in status, status
    assert show_plan(demo_plan.store, plan_id).summary.plan.automation_profile == "cautious"


async def test_m_on_a_plan_of_the_scripted_reasoner_says_it_asks_no_model(
    demo_plan: DemoPlan,
) -> None:
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await _opened(app, pilot, "m")
        await settle(app, pilot)
        assert not isinstance(app.screen, ModelModal)
        [note] = [n.message for n in app._notifications]
        assert "runs with the scripted reasoner, which asks no model" in note


async def test_m_moves_the_plan_to_the_server_that_answers_and_r_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plan's server moved: its run fails naming set-model. In the app, `m` with the new
    base URL, then `R`: the run asks the new server and goes on to its question."""
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(tmp_path / "sandboxes"))
    monkeypatch.setenv("OPENAI_API_KEY", "local")
    db = str(tmp_path / "agents.db")
    action = tmp_path / "think.yaml"
    action.write_text(yaml.safe_dump({"name": "local/think", "prompt": "Think it through"}))

    def run(*args: str) -> str:
        result = CliRunner().invoke(cli, ["--db", db, *args])
        assert result.exit_code == 0, result.output
        return result.output

    with OpenAIServer() as first:
        monkeypatch.setenv("OPENAI_BASE_URL", first.base_url)
        run("plan", "use", str(action), "--model", MODEL, "--automation-profile", "manual")
    [gate] = json.loads(run("approval", "list", "--format=json"))["approvals"]
    run("approval", "approve", gate["approval_id"])
    store = Store.open(db)
    try:
        plan_id = gate["plan_id"]
        with OpenAIServer([STRATEGY, finish_phase()]) as second:
            app = AgentsApp(
                store,
                user="tester",
                plan_id=plan_id,
                run_options=RunOptions(sandbox_base=tmp_path / "sandboxes"),
                poll_seconds=None,
            )
            async with app.run_test(size=SIZE) as pilot:
                await settle(app, pilot)
                await _opened(app, pilot, "m")
                assert isinstance(app.screen, ModelModal)
                fields = list(app.screen.query(Input))
                assert [f.value for f in fields] == [MODEL, first.base_url]
                fields[1].value = second.base_url
                fields[1].focus()
                await pilot.press("enter")
                await settle(app, pilot)
                assert for_plan(store, plan_id) == ModelChoice(MODEL, second.base_url)
                await pilot.press("R")
                await settle(app, pilot)
            assert len(second.completions) == 1  # the new server made the decision
        [asked] = pending_approvals(store, plan_id)
        assert asked.question.startswith("How?")
    finally:
        store.close()
