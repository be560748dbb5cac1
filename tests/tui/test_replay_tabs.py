"""Two tabs correct the same plan at once: each replay dialog shows its own outcome. The
losing tab is refused ("busy") and must not show the winner's events; its reason wraps to
the dialog's width instead of being cut at the window edge."""

from __future__ import annotations

import pytest
from textual.worker import WorkerFailed

from cleveragents_tui.domain.enums import CorrectionMode
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.run import run_lease
from cleveragents_tui.tui.modals.replay import ReplayModal
from tests.tui.conftest import DemoPlan, settle

pytestmark = pytest.mark.anyio

RECORD = "A row in the releases table"


async def test_the_losing_tab_shows_its_refusal_not_the_winners_correction(
    demo_plan: DemoPlan,
) -> None:
    store, plan_id = demo_plan.store, demo_plan.plan.plan_id
    base = demo_plan.options.sandbox_base
    impact = preview(
        store,
        demo_plan.decision(RECORD),
        CorrectionMode.REVERT,
        "record rc1",
        choose=1,
        sandbox_base=base,
    )
    app = demo_plan.app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)  # the app reads the store in workers
        # The other tab won: it holds the plan and has started its correction.
        with run_lease.holding(base, plan_id, "correcting"):
            replay = ReplayModal(impact)
            with store.unit_of_work(write=True) as uow:
                uow.events.append(
                    "correction_started",
                    {"correction_id": "01WINNERWINNERWINNERWINNER", "mode": "revert"},
                    plan_id=plan_id,
                    actor="bob",
                )
                uow.commit()
            await app.push_screen(replay)
            await pilot.pause()
            assert replay.worker is not None
            with pytest.raises(WorkerFailed):
                await replay.worker.wait()
            await pilot.pause()
        log = replay.query_one("#replay-log")
        lines: list[str] = list(log.lines)  # type: ignore[attr-defined]
        assert replay.error is not None and "busy" in replay.error
        assert not any("started (revert)" in line or "WINNER" in line for line in lines), lines
        text = " ".join(line.strip() for line in lines)
        assert "is busy: another task of this process is correcting it" in text, lines
        assert all(len(line) <= log.scrollable_content_region.width for line in lines), lines
