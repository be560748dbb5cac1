"""Divergences the correction oracle found, kept as fixed examples (the property test draws
its actions at random; these must hold whatever it draws).

Each example runs an action, makes the corrections, applies, and compares the applied
result with a fresh plan of the same action taking the corrected choices from the start.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cleveragents_tui.domain.enums import CorrectionMode, CorrectionStatus
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.preview import preview
from tests.reliability.oracle_world import (
    DB,
    FILES,
    LAYERS,
    REPO,
    Side,
    match_word,
    with_choices,
    with_corrective_work,
)
from tests.reliability.test_correction_oracle import (
    accept_failures,
    apply,
    check_oracle,
    run_to_apply_gate,
)


def _point(key: str, kind: str, *calls: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "key": key,
        "type": kind,
        "question": f"What does {key} do?",
        "alternatives": [
            {
                "option": f"{key} option {letter}",
                "match": [match_word(key, letter)],
                "tool_calls": made,
            }
            for letter, made in zip("ab", calls, strict=True)
        ],
    }


def _insert(name: str) -> dict[str, Any]:
    sql = "INSERT INTO items (name, n) VALUES (:name, 1)"
    return {
        "tool": "local/run-sql",
        "arguments": {"resource": DB, "sql": sql, "params": {"name": name}},
    }


def _write(path: str, content: str, resource: str = FILES) -> dict[str, Any]:
    return {
        "tool": "local/write-file",
        "arguments": {"resource": resource, "path": path, "content": content},
    }


def _revert(side: Side, plan_id: str, key: str, letter: str) -> None:
    decision = side.current(plan_id)[key]
    impact = preview(
        side.store, decision.decision_id, CorrectionMode.REVERT, f"take {match_word(key, letter)}"
    )
    done = execute(
        side.store, impact, acknowledged=True, requested_by="oracle", options=side.options
    )
    assert done.correction.status is CorrectionStatus.SUCCEEDED, done.correction
    assert side.current(plan_id)[key].chosen_option == f"{key} option {letter}"


def test_a_decision_kept_by_one_revert_can_be_reverted_next(tmp_path: Path) -> None:
    """The first revert rolls both resources back past d03, which it keeps (d03 wrote
    nothing); d03's own checkpoints still hold d02's old work. Reverting d03 next must
    start from the state the first revert restored, not from those stale checkpoints."""
    definition = {
        "name": "oracle/action",
        "prompt": "change the resources as the points say",
        "resources": [DB, FILES],
        "decisions": [
            _point("d00", "strategy_choice", [], []),
            _point("d01", "tool_invocation", [_insert("one")], [_insert("uno")]),
            _point("d02", "tool_invocation", [_write("a.txt", "old")], [_write("a.txt", "new")]),
            _point("d03", "tool_invocation", [], [_write("b.txt", "later"), _insert("b")]),
        ],
    }
    side = Side.make(tmp_path / "corrected")
    try:
        plan_id = run_to_apply_gate(side, tmp_path, definition)
        _revert(side, plan_id, "d02", "b")
        _revert(side, plan_id, "d03", "b")
        chosen = {k: d.chosen_option for k, d in side.current(plan_id).items()}
        apply(side, plan_id)
        check_oracle(definition, side, with_choices(definition, chosen), tmp_path, ["d02→b, d03→b"])
    finally:
        side.close()


def _check(resource: str, *argv: str) -> dict[str, Any]:
    return {"tool": "local/run-tests", "arguments": {"resource": resource, "argv": list(argv)}}


def test_a_check_after_the_reverted_write_runs_again_on_the_corrected_files(
    tmp_path: Path,
) -> None:
    """d02 only runs checks (it writes nothing) on what d01 wrote, and depends on nothing.
    Reverting d01 to b must run them again: a fresh plan taking b finds "alpha" gone from
    a.txt in both folders, where the kept checks had found it."""
    write = [_write("a.txt", "alpha\n", REPO), _write("a.txt", "alpha\n")]
    other = [_write("a.txt", "beta\n", REPO), _write("a.txt", "beta\n")]
    checks = [
        _check(REPO, "grep", "-q", "alpha", "a.txt"),
        _check(FILES, "grep", "-q", "alpha", "a.txt"),
    ]
    definition = {
        "name": "oracle/action",
        "prompt": "change the resources as the points say",
        "resources": [FILES, REPO],
        "decisions": [
            _point("d00", "strategy_choice", [], []),
            _point("d01", "implementation_choice", write, other),
            _point("d02", "tool_invocation", checks, []),
        ],
    }
    side = Side.make(tmp_path / "corrected")
    try:
        plan_id = run_to_apply_gate(side, tmp_path, definition)
        assert side.verdicts(plan_id)["d02"] == [("local/run-tests", True)] * 2
        _revert(side, plan_id, "d01", "b")
        with side.store.unit_of_work() as uow:
            accept_failures(side, uow.plans.get(plan_id))  # as a person would, both times
        verdicts = side.verdicts(plan_id)
        assert verdicts["d02"] == [("local/run-tests", False)] * 2
        chosen = {k: d.chosen_option for k, d in side.current(plan_id).items()}
        apply(side, plan_id)
        story = ["d01→b"]
        check_oracle(definition, side, with_choices(definition, chosen), tmp_path, story, verdicts)
    finally:
        side.close()


def test_a_point_under_a_skipped_point_is_skipped_and_made_once_its_parent_is(
    tmp_path: Path,
) -> None:
    """d02 exists only for d01's option b, and d03 sits under it: the plan runs (d02 and d03
    skipped, not a crash), and correcting d01 to b makes both, as a fresh plan would."""
    conditional = _point("d02", "tool_invocation", [_write("c.txt", "c")], [])
    conditional["when"] = {"d01": "d01 option b"}
    child = _point("d03", "tool_invocation", [_insert("under")], [])
    child["parent"] = "d02"
    definition = {
        "name": "oracle/action",
        "prompt": "change the resources as the points say",
        "resources": [DB, FILES],
        "decisions": [
            _point("d00", "strategy_choice", [], []),
            _point("d01", "tool_invocation", [_write("a.txt", "a")], [_write("a.txt", "b")]),
            conditional,
            child,
        ],
    }
    side = Side.make(tmp_path / "corrected")
    try:
        plan_id = run_to_apply_gate(side, tmp_path, definition)
        assert set(side.current(plan_id)) == {"d00", "d01"}
        _revert(side, plan_id, "d01", "b")
        chosen = {k: d.chosen_option for k, d in side.current(plan_id).items()}
        assert set(chosen) == {"d00", "d01", "d02", "d03"}
        apply(side, plan_id)
        check_oracle(definition, side, with_choices(definition, chosen), tmp_path, ["d01→b"])
    finally:
        side.close()


def test_the_budget_can_prune_an_overlay_checkpoint_a_revert_went_back_past(
    tmp_path: Path,
) -> None:
    """Found by the soak (two corrections, the first of a Strategize decision): the first
    revert took the overlay back to its baseline, deleting the layers of the old attempt;
    their checkpoint rows stayed, so when the checkpoint budget later pruned the oldest of
    them the replay failed ("checkpoint 000001-… of oracle/layers does not exist"). The
    overlay keeps what a rollback goes back past, as the other strategies do."""
    definition = {
        "name": "oracle/action",
        "prompt": "change the resources as the points say",
        "resources": [LAYERS],
        "decisions": [
            _point("d00", "strategy_choice", [], []),
            *(
                _point(
                    f"d0{n}",
                    "tool_invocation",
                    [_write(f"{n}.txt", "a", LAYERS)],
                    [_write(f"{n}.txt", "b", LAYERS)],
                )
                for n in (1, 2, 3)
            ),
        ],
    }
    side = Side.make(tmp_path / "corrected", budgets={LAYERS: 5})  # pruned early
    try:
        plan_id = run_to_apply_gate(side, tmp_path, definition)
        _revert(side, plan_id, "d00", "b")
        _revert(side, plan_id, "d02", "b")
        chosen = {k: d.chosen_option for k, d in side.current(plan_id).items()}
        apply(side, plan_id)
        check_oracle(definition, side, with_choices(definition, chosen), tmp_path, ["d00→b, d02→b"])
    finally:
        side.close()


def test_a_strategize_point_that_exists_only_for_a_choice_goes_when_the_choice_changes(
    tmp_path: Path,
) -> None:
    """Found by the oracle (two corrections): d01, a Strategize point that exists only for
    d00's option a (``when``), stayed current after d00 was corrected to b — it was nobody's
    child or dependent, so the correction did not affect it — and a second correction of it
    was lost. A point's ``when`` is an influence edge now, like ``depends_on``."""
    conditional = _point("d01", "strategy_choice", [], [])
    conditional["when"] = {"d00": "d00 option a"}
    work = _point("d02", "tool_invocation", [_write("a.txt", "a")], [_write("a.txt", "b")])
    work["when"] = {"d00": "d00 option a"}
    definition = {
        "name": "oracle/action",
        "prompt": "change the resources as the points say",
        "resources": [DB, FILES],
        "decisions": [_point("d00", "strategy_choice", [], []), conditional, work],
    }
    side = Side.make(tmp_path / "corrected")
    try:
        plan_id = run_to_apply_gate(side, tmp_path, definition)
        assert set(side.current(plan_id)) == {"d00", "d01", "d02"}
        _revert(side, plan_id, "d00", "b")
        assert set(side.current(plan_id)) == {"d00"}
        _revert(side, plan_id, "d00", "a")
        chosen = {k: d.chosen_option for k, d in side.current(plan_id).items()}
        assert set(chosen) == {"d00", "d01", "d02"}
        apply(side, plan_id)
        check_oracle(definition, side, with_choices(definition, chosen), tmp_path, ["d00→b→a"])
    finally:
        side.close()


def test_a_retry_whose_checkpoint_the_budget_pruned_keeps_the_work_before_it(
    tmp_path: Path,
) -> None:
    """Found by the soak (one revert of an Execute decision, a long action): a failed call is
    retried after its resource goes back to the ``pre_write`` checkpoint taken before the call
    (engine/run/restore_on_failure.py). The first run fits the checkpoint budget; the replay,
    with the old attempt's checkpoints still live, goes past it, the retry's own decision
    checkpoint pruned that ``pre_write``, and the retry restored the oldest live one instead
    — the plan's first — erasing the work of every decision before it (here d01's and d02's).
    An older checkpoint is never a stand-in: with its own pruned, the retry restores nothing."""
    missing = {"tool": "local/delete-file", "arguments": {"resource": FILES, "path": "nope.txt"}}
    definition = {
        "name": "oracle/action",
        "prompt": "change the resources as the points say",
        "resources": [FILES],
        "decisions": [
            _point("d00", "strategy_choice", [], []),
            _point("d01", "tool_invocation", [_write("a.txt", "a")], [_write("a.txt", "b")]),
            _point("d02", "tool_invocation", [_write("b.txt", "kept")], []),
            _point("d03", "tool_invocation", [missing], []),
        ],
    }
    side = Side.make(tmp_path / "corrected", budgets={FILES: 10})  # the first run fits
    try:
        plan_id = run_to_apply_gate(side, tmp_path, definition)
        _revert(side, plan_id, "d01", "b")  # d02 and d03 are re-made on the new a.txt
        chosen = {k: d.chosen_option for k, d in side.current(plan_id).items()}
        apply(side, plan_id)
        check_oracle(definition, side, with_choices(definition, chosen), tmp_path, ["d01→b"])
    finally:
        side.close()


def test_a_budget_limited_sandbox_still_restores_before_each_retry(tmp_path: Path) -> None:
    """The checkpoint budget never prunes the newest ``pre_write`` checkpoint: a failed call
    (a command that writes half its work, then exits 1) is retried from the state before
    its run, as a plan with the default budget retries it, however small the budget. With a
    budget of 2, the retry decision's own checkpoint used to prune that ``pre_write``, the
    retry restored nothing, and each run's line piled up in the applied file."""
    half_done = {
        "tool": "local/run-command",
        "arguments": {"resource": FILES, "argv": ["sh", "-c", "echo line >> out.txt; exit 1"]},
    }
    definition = {
        "name": "oracle/action",
        "prompt": "change the resources as the points say",
        "resources": [FILES],
        "decisions": [
            _point("d00", "strategy_choice", [], []),
            _point("d01", "tool_invocation", [_write("a.txt", "a")], []),
            _point("d02", "tool_invocation", [half_done], []),
        ],
    }
    side = Side.make(tmp_path / "limited", budgets={FILES: 2})
    try:
        apply(side, run_to_apply_gate(side, tmp_path, definition))
        assert (side.locations[FILES] / "out.txt").read_text() == "line\n"
        check_oracle(definition, side, definition, tmp_path, ["budget 2 against the default"])
    finally:
        side.close()


def _append(side: Side, plan_id: str, key: str, letter: str) -> None:
    decision = side.current(plan_id)[key]
    impact = preview(
        side.store, decision.decision_id, CorrectionMode.APPEND, f"take {match_word(key, letter)}"
    )
    done = execute(
        side.store, impact, acknowledged=True, requested_by="oracle", options=side.options
    )
    assert done.correction.status is CorrectionStatus.SUCCEEDED, done.correction


def test_an_appended_plan_that_stopped_hands_its_later_writes_to_its_host(
    tmp_path: Path,
) -> None:
    """Found by the soak (append): the appended plan works in its parent's sandboxes. Its
    first call failed, so it stopped for the failure and the parent stopped for it ("child
    plan stopped"), sealing the sandboxes as they were. Resumed, the appended plan made
    folders, refreshing only its own seal, and the parent's Apply then asked about
    "files changed outside the plan" — its appended plan's. An appended plan's writes
    refresh its host's seal too."""
    fails = {
        "tool": "local/edit-file",
        "arguments": {"resource": REPO, "path": "run.sh", "old": "alpha", "new": "alpha"},
    }
    mkdir = {
        "tool": "local/mkdir",
        "arguments": {"resource": REPO, "path": "sub/e2/e3", "mode": "0700"},
    }
    definition = {
        "name": "oracle/action",
        "prompt": "change the resources as the points say",
        "resources": [REPO],
        "decisions": [
            _point("d00", "strategy_choice", [], []),
            _point("d01", "tool_invocation", [_write("a.txt", "a", REPO)], []),
            _point("d02", "tool_invocation", [], [fails, mkdir]),
        ],
    }
    side = Side.make(tmp_path / "corrected")
    try:
        plan_id = run_to_apply_gate(side, tmp_path, definition)
        chosen = {k: d.chosen_option for k, d in side.current(plan_id).items()}
        _append(side, plan_id, "d02", "b")
        apply(side, plan_id)
        fresh = with_corrective_work(definition, chosen, "d02", "d02 option b")
        check_oracle(definition, side, fresh, tmp_path, ["appended d02→b"])
    finally:
        side.close()
