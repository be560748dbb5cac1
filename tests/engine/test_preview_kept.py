"""What a correction's preview keeps between previews, and what it must still see (issue 22).

The preview keeps the seal file's parse for the same bytes (engine/core/reconcile.py), the
plan's part of its snapshot with the plan-level reads until the database changes
(engine/correct/snapshot.py, store/snapshot_reads.py) and each decision's model by its row
as read. None of it may hide a change: a file edited outside the plan after a preview is
reported by the next one, a seal rewritten (to the same size) is read anew, and what another
process writes to the database is in the next snapshot.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import insert

from cleveragents_tui.domain.enums import CorrectionMode
from cleveragents_tui.domain.ids import new_ulid
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.engine.core.reconcile import SEAL_FILE
from cleveragents_tui.engine.correct.model import CorrectionRequest, Impact
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.correct.snapshot import load
from cleveragents_tui.store.store import Store
from cleveragents_tui.store.tables import DecisionRow, ToolInvocationRow
from tests.support.scale_plan import FILES, ScalePlan, build

GUIDANCE = "make it loud"


@pytest.fixture
def plan(tmp_path: Path) -> Iterator[ScalePlan]:
    scale = build(tmp_path, 30)
    yield scale
    scale.store.close()


def _preview(scale: ScalePlan) -> Impact:
    return preview(
        scale.store,
        scale.ids[0],
        CorrectionMode.REVERT,
        GUIDANCE,
        sandbox_base=scale.options.sandbox_base,
    )


def _seal(scale: ScalePlan) -> Path:
    base = scale.options.sandbox_base
    assert base is not None
    return base / scale.plan_id / SEAL_FILE


def _sealed_file(scale: ScalePlan) -> tuple[Path, str]:
    """The plan's directory sandbox's folder and a file in it, as its seal lists them."""
    seal = json.loads(_seal(scale).read_text("utf-8"))["resources"][FILES]
    path = next(p for p, entry in sorted(seal["files"].items()) if entry[0] == "file")
    return Path(seal["folder"]), path


def _changed(impact: Impact) -> set[str]:
    return {p for change in impact.outside_changes for p in change.paths}


def test_a_file_edited_outside_after_a_preview_is_reported_by_the_next(plan: ScalePlan) -> None:
    assert _preview(plan).outside_changes == ()  # seal and folder parsed, kept
    folder, path = _sealed_file(plan)
    edited = folder / path
    edited.write_bytes(b"x" * edited.stat().st_size)  # in place, the same size: no
    os.utime(edited, ns=(0, 1))  # folder's time changes, the file's is another
    assert _changed(_preview(plan)) == {path}
    (folder / "new.txt").write_text("new\n", "utf-8")
    assert _changed(_preview(plan)) == {path, "new.txt"}


def test_a_seal_rewritten_to_the_same_size_is_read_anew(plan: ScalePlan) -> None:
    assert _preview(plan).outside_changes == ()
    seal = _seal(plan)
    text = seal.read_text("utf-8")
    data = json.loads(text)
    files = data["resources"][FILES]["files"]
    path = next(p for p, entry in sorted(files.items()) if entry[0] == "file")
    kind, size, mtime, mode = files[path]
    # another mtime of as many digits: the file's bytes change, not its size
    files[path] = [kind, size, int(str(mtime)[:-1] + str((int(str(mtime)[-1]) + 1) % 10)), mode]
    rewritten = json.dumps(data)
    assert len(rewritten) == len(text)
    seal.write_text(rewritten, "utf-8")
    assert _changed(_preview(plan)) == {path}  # the folder now differs from this seal
    seal.write_text(text, "utf-8")
    assert _preview(plan).outside_changes == ()


def test_what_another_process_writes_is_in_the_next_snapshot(
    plan: ScalePlan, tmp_path: Path
) -> None:
    request = CorrectionRequest(
        plan.ids[0], CorrectionMode.REVERT, GUIDANCE, sandbox_base=plan.options.sandbox_base
    )
    first = load(plan.store, request)
    assert load(plan.store, request).resources is first.resources  # kept: nothing changed
    other = Store.open(str(tmp_path / "agents.db"))  # another engine: as another process
    try:
        with other.unit_of_work(write=True) as uow:
            uow.resources.add(
                Resource(
                    resource_id="test/later",
                    kind="external",
                    location=str(tmp_path / "later"),
                    sandbox_strategy="none",
                )
            )
            uow.commit()
        assert "test/later" in load(plan.store, request).resources
        # a decision of a step recorded under the target by the other process, with a
        # call that cannot be undone: the step's current decision now, affected, its call
        # named
        decision_id = new_ulid()
        now = datetime.now(UTC)
        with other.engine.begin() as connection:
            connection.execute(
                insert(DecisionRow),
                [
                    {
                        "decision_id": decision_id,
                        "plan_id": plan.plan_id,
                        "parent_decision_id": plan.ids[0],
                        "sequence_number": 10_000,
                        "decision_type": "implementation_choice",
                        "phase": "execute",
                        "question": "later",
                        "step_key": "step-0",
                        "chosen_option": "later",
                        "alternatives_considered": "[]",
                        "relevant_resources": "[]",
                        "created_at": now,
                        "is_correction": False,
                    }
                ],
            )
            connection.execute(
                insert(ToolInvocationRow),
                [
                    {
                        "invocation_id": new_ulid(),
                        "plan_id": plan.plan_id,
                        "decision_id": decision_id,
                        "tool": "local/launch",
                        "arguments": "{}",
                        "side_effects": '["launches"]',
                        "irreversible": True,
                        "created_at": now,
                        "ok": True,
                        "output": "",
                    }
                ],
            )
    finally:
        other.close()
    assert load(plan.store, request).current_steps["step-0"][0] == decision_id
    impact = _preview(plan)
    assert decision_id in impact.affected_decisions
    assert "local/launch" in {e.tool for e in impact.irreversible}
