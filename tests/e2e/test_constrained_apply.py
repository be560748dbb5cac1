"""A constrained Apply goes back to Strategize (``access_network``), or asks a person."""

from __future__ import annotations

from pathlib import Path

import pytest

from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.approval import ApprovalAnswer
from cleveragents_tui.domain.enums import Phase, PlanState
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.engine.run.approvals import answer_approval
from cleveragents_tui.engine.run.constrained_apply import REQUESTED_BY
from cleveragents_tui.engine.run.lifecycle import resume_plan
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.store.store import Store
from tests.support.flag_profiles import register_profile


def _write(resource: str, path: str) -> dict[str, object]:
    return {
        "tool": "local/write-file",
        "arguments": {"resource": resource, "path": path, "content": "from the plan\n"},
    }


def layout_action(resource: str) -> Action:
    """Layout alpha writes a.txt; layout beta (which guidance naming a refusal selects)
    writes b.txt."""
    return Action.model_validate(
        {
            "name": "local/layout",
            "prompt": "write the layout",
            "resources": [resource],
            "decisions": [
                {
                    "key": "layout",
                    "type": "strategy_choice",
                    "question": "Which layout?",
                    "alternatives": [
                        {"option": "layout alpha", "match": ["alpha"]},
                        {"option": "layout beta", "match": ["refused"]},
                    ],
                },
                {
                    "key": "write-alpha",
                    "type": "implementation_choice",
                    "parent": "layout",
                    "when": {"layout": "layout alpha"},
                    "question": "Write it?",
                    "alternatives": [
                        {"option": "a.txt", "tool_calls": [_write(resource, "a.txt")]}
                    ],
                },
                {
                    "key": "write-beta",
                    "type": "implementation_choice",
                    "parent": "layout",
                    "when": {"layout": "layout beta"},
                    "question": "Write it?",
                    "alternatives": [
                        {"option": "b.txt", "tool_calls": [_write(resource, "b.txt")]}
                    ],
                },
            ],
        }
    )


@pytest.fixture
def files(sqlite_store: Store, tmp_path: Path) -> Resource:
    (tmp_path / "files").mkdir()
    resource = Resource(
        resource_id="local/files",
        kind="filesystem",
        location=str(tmp_path / "files"),
        sandbox_strategy="filesystem_copy",
    )
    with sqlite_store.unit_of_work(write=True) as uow:
        uow.resources.add(resource)
        uow.commit()
    return resource


@pytest.fixture
def options(tmp_path: Path) -> RunOptions:
    return RunOptions(sandbox_base=tmp_path / "sandboxes")


def _constrained(store: Store, files: Resource, options: RunOptions, profile: str) -> Plan:
    """Run the plan to its Apply gate, change a.txt in the real folder, apply."""
    from cleveragents_tui.engine.run.lifecycle import apply_plan

    plan = start_plan(
        store, layout_action(files.resource_id), profile_override=profile, options=options
    )
    assert (plan.phase, plan.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
    (Path(files.location) / "a.txt").write_text("a person's own a.txt\n")
    return apply_plan(store, plan.plan_id, "alice", options)


def test_at_the_threshold_a_constrained_apply_reverts_to_strategize_and_lands(
    sqlite_store: Store, files: Resource, options: RunOptions, tmp_path: Path
) -> None:
    # access_network 0.0: revert alone; select_tool 1.0: the first Apply is a person's.
    register_profile(sqlite_store, "revert", thresholds={"select_tool": 1.0, "access_network": 0.0})
    plan = _constrained(sqlite_store, files, options, "local/revert")
    # The revert re-decided the layout with the refusal as guidance (beta), replayed, and
    # stopped at the new attempt's Apply gate.
    assert (plan.phase, plan.state, plan.attempt) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL, 2)
    with sqlite_store.unit_of_work() as uow:
        [correction] = uow.corrections.for_plan(plan.plan_id)
        current = {
            d.step_key: d.chosen_option
            for d in uow.decisions.for_plan(plan.plan_id, include_superseded=False)
        }
    assert correction.requested_by == REQUESTED_BY
    assert "Apply was refused" in correction.guidance and "a.txt" in correction.guidance
    assert current["layout"] == "layout beta" and "write-beta" in current
    from cleveragents_tui.engine.run.lifecycle import apply_plan

    applied = apply_plan(sqlite_store, plan.plan_id, "alice", options)
    assert applied.state is PlanState.APPLIED
    real = Path(files.location)
    assert (real / "b.txt").read_text() == "from the plan\n"
    assert (real / "a.txt").read_text() == "a person's own a.txt\n"  # never overwritten


def test_below_the_threshold_a_person_is_asked_and_approving_reverts(
    sqlite_store: Store, files: Resource, options: RunOptions
) -> None:
    plan = _constrained(sqlite_store, files, options, "auto")  # access_network 1.0
    assert (plan.phase, plan.state) == (Phase.APPLY, PlanState.CONSTRAINED)
    with sqlite_store.unit_of_work() as uow:
        [question] = uow.approvals.pending(plan.plan_id)
        assert uow.corrections.for_plan(plan.plan_id) == []
    assert question.details["flag"] == "access_network"
    assert "Apply was refused" in question.question and "revert to Strategize" in question.question
    answer_approval(sqlite_store, question.approval_id, approve=True, by="alice")
    reverted = resume_plan(sqlite_store, plan.plan_id, options)
    assert (reverted.phase, reverted.state, reverted.attempt) == (
        Phase.EXECUTE,
        PlanState.AWAITING_APPROVAL,
        2,
    )
    with sqlite_store.unit_of_work() as uow:
        [correction] = uow.corrections.for_plan(plan.plan_id)
    assert correction.requested_by == REQUESTED_BY


def test_running_the_plan_while_asked_retries_the_apply_instead(
    sqlite_store: Store, files: Resource, options: RunOptions
) -> None:
    plan = _constrained(sqlite_store, files, options, "auto")
    (Path(files.location) / "a.txt").unlink()  # the person puts the real folder right
    retried = resume_plan(sqlite_store, plan.plan_id, options)
    assert retried.state is PlanState.APPLIED
    with sqlite_store.unit_of_work() as uow:
        [question] = uow.approvals.every(plan.plan_id)[-1:]
        assert uow.approvals.pending(plan.plan_id) == []
        assert uow.corrections.for_plan(plan.plan_id) == []
    assert question.answer is ApprovalAnswer.DENIED and "retried" in (question.reason or "")


def test_automatic_reversions_stop_at_max_retries_per_step_and_ask(
    sqlite_store: Store, files: Resource, options: RunOptions
) -> None:
    from cleveragents_tui.engine.run.lifecycle import apply_plan

    # Every layout writes a.txt here, so each revert meets the same conflict again.
    action = layout_action(files.resource_id).model_dump(mode="json")
    action["decisions"][2]["alternatives"][0]["tool_calls"] = [_write(files.resource_id, "a.txt")]
    register_profile(
        sqlite_store,
        "loop",
        base="ci",
        safety={"max_retries_per_step": 1},
        thresholds={"select_tool": 1.0, "access_network": 0.0},
    )
    plan = start_plan(
        sqlite_store, Action.model_validate(action), profile_override="local/loop", options=options
    )
    (Path(files.location) / "a.txt").write_text("a person's own a.txt\n")
    first = apply_plan(sqlite_store, plan.plan_id, "alice", options)
    assert (first.state, first.attempt) == (PlanState.AWAITING_APPROVAL, 2)  # reverted alone
    second = apply_plan(sqlite_store, plan.plan_id, "alice", options)
    assert (second.phase, second.state) == (Phase.APPLY, PlanState.CONSTRAINED)
    with sqlite_store.unit_of_work() as uow:
        corrections = uow.corrections.for_plan(plan.plan_id)
        [question] = uow.approvals.pending(plan.plan_id)
    assert len(corrections) == 1  # one automatic revert, then a person is asked
    assert question.details["flag"] == "access_network"
    assert question.details["max_retries_per_step"] == 1


def test_plan_apply_says_the_apply_was_refused_and_the_plan_reverted(
    sqlite_url: str, files: Resource, tmp_path: Path
) -> None:
    import json

    import yaml
    from click.testing import CliRunner

    from cleveragents_tui.cli import cli

    store = Store.open(sqlite_url)
    try:
        register_profile(store, "revert", thresholds={"select_tool": 1.0, "access_network": 0.0})
    finally:
        store.close()
    action_file = tmp_path / "layout.yaml"
    action_file.write_text(yaml.safe_dump(layout_action(files.resource_id).model_dump(mode="json")))
    runner = CliRunner()
    env = {"AGENTS_SANDBOX_DIR": str(tmp_path / "sandboxes")}
    base = ["--db", sqlite_url]
    use = ["plan", "use", str(action_file), "--automation-profile", "local/revert"]
    used = runner.invoke(cli, [*base, "--format=json", *use], env=env)
    assert used.exit_code == 0, used.output
    plan_id = json.loads(used.stdout)["plan"]["plan_id"]
    (Path(files.location) / "a.txt").write_text("a person's own a.txt\n")
    applied = runner.invoke(cli, [*base, "plan", "apply", plan_id], env=env)
    assert applied.exit_code == 0, applied.output
    lines = applied.stdout.splitlines()
    assert "awaiting_approval · attempt 2" in lines[0]
    assert lines[1].startswith("  not applied: Apply was refused: ") and "a.txt" in lines[1]
    assert "reverted to Strategize by" in lines[1]


def _two_folders(
    store: Store, files: Resource, options: RunOptions, tmp_path: Path
) -> tuple[Plan, Path]:
    """Layout alpha writes a.txt to ``files`` and m.txt to a second folder; run to the
    Apply gate under a profile that reverts a constrained Apply alone."""
    more = Resource(
        resource_id="local/more",
        kind="filesystem",
        location=str(tmp_path / "more"),
        sandbox_strategy="filesystem_copy",
    )
    Path(more.location).mkdir()
    with store.unit_of_work(write=True) as uow:
        uow.resources.add(more)
        uow.commit()
    action = layout_action(files.resource_id).model_dump(mode="json")
    action["resources"] = [files.resource_id, more.resource_id]
    action["decisions"][1]["alternatives"][0]["tool_calls"].append(
        _write(more.resource_id, "m.txt")
    )
    register_profile(store, "revert", thresholds={"select_tool": 1.0, "access_network": 0.0})
    plan = start_plan(
        store, Action.model_validate(action), profile_override="local/revert", options=options
    )
    return plan, Path(more.location)


def _files(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in folder.iterdir()}


def test_a_refusal_at_the_last_resource_lands_nothing_and_reverts(
    sqlite_store: Store, files: Resource, options: RunOptions, tmp_path: Path
) -> None:
    """The second folder would refuse: Apply asks every sandbox before landing any, so the
    first folder gets nothing either, and the plan goes back to Strategize as for a lone
    resource. What lands in the end is what a run choosing layout beta lands: b.txt only,
    the person's m.txt kept."""
    from cleveragents_tui.engine.run.lifecycle import apply_plan

    plan, more = _two_folders(sqlite_store, files, options, tmp_path)
    (more / "m.txt").write_text("a person's own m.txt\n")
    result = apply_plan(sqlite_store, plan.plan_id, "alice", options)
    assert (result.phase, result.state, result.attempt) == (
        Phase.EXECUTE,
        PlanState.AWAITING_APPROVAL,
        2,
    )
    assert _files(Path(files.location)) == {}  # the first folder was not landed
    with sqlite_store.unit_of_work() as uow:
        [correction] = uow.corrections.for_plan(plan.plan_id)
    assert correction.requested_by == REQUESTED_BY and "m.txt" in (correction.guidance or "")
    applied = apply_plan(sqlite_store, plan.plan_id, "alice", options)
    assert applied.state is PlanState.APPLIED
    assert _files(Path(files.location)) == {"b.txt": "from the plan\n"}
    assert _files(more) == {"m.txt": "a person's own m.txt\n"}


def test_a_resource_changed_after_the_check_leaves_the_rest_landed_and_is_not_reverted(
    sqlite_store: Store,
    files: Resource,
    options: RunOptions,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The second folder changes while the first lands (after Apply asked them both): the
    first stays landed, and the plan is neither reverted nor asked about — a replay from
    the baselines would meet the landed a.txt as a change made outside the plan."""
    from cleveragents_tui.engine.run.lifecycle import apply_plan
    from cleveragents_tui.sandbox.filesystem_copy import FilesystemCopySandbox

    plan, more = _two_folders(sqlite_store, files, options, tmp_path)
    land = FilesystemCopySandbox.apply

    def land_then_someone_writes(sandbox: FilesystemCopySandbox) -> object:
        landed = land(sandbox)
        (more / "m.txt").write_text("a person's own m.txt\n")
        return landed

    monkeypatch.setattr(FilesystemCopySandbox, "apply", land_then_someone_writes)
    result = apply_plan(sqlite_store, plan.plan_id, "alice", options)
    assert (result.phase, result.state, result.attempt) == (Phase.APPLY, PlanState.CONSTRAINED, 1)
    assert _files(Path(files.location)) == {"a.txt": "from the plan\n"}  # the first landed
    assert _files(more) == {"m.txt": "a person's own m.txt\n"}
    with sqlite_store.unit_of_work() as uow:
        assert uow.corrections.for_plan(plan.plan_id) == []
        assert uow.approvals.pending(plan.plan_id) == []
