"""Fault loop (issue 9, item 4): every external call of a correction fails, one at a time.

The external calls go through single choke points, each a failpoint: ``git.call`` (every git
command a git worktree sandbox runs), ``fs.write`` (every file a sandbox writes, in its copy
and its archive), ``store.commit`` (every database commit of the store) and ``saver.put``
(every LangGraph checkpoint written). A dry run of a correction counts the calls; then, for
every N, the correction runs again from the same state with the Nth call of one kind failing
(``git.call#N=raise``). Each must end in one of:

- **completed**: the correction succeeded, and the plan and every resource are as after the
  correction without a fault; or the fault hit its replay: the correction is recorded failed
  ("its replay failed", the plan errored, the decisions corrected), and running the plan on
  (`agents plan run`, as its message says) ends where the correction without a fault does;
- **failed cleanly**: the correction failed (or was refused), the plan is errored or
  untouched, no decision was superseded, and every resource is as it was before: files byte
  for byte, database rows, the tree of the sandbox's git HEAD, the user's own HEAD.

In every case the invariant checker finds nothing.

Two engine bugs this loop found are fixed, and would fail it again: a resumed step now runs
the tool calls its recorded decision had not made yet, and a correction past its resource
rollback is carried forward (docs/reliability.md), the basis of its diff included.

A revert of the parent's implementation re-makes its announce decision (later_writers), so
the team-chat outbox gets a notification each run, stamped with the time it was sent: the
outbox is compared without those times (:func:`untimed`).

Two corrections cover the four kinds: ``parent`` reverts the demo plan's first Execute
decision (a git worktree, a database, a ``none`` resource), ``child`` reverts the Execute
decision of its child plan (a filesystem copy).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.reliability import scenario
from tests.reliability.harness import (
    Worker,
    on_each,
    record_figures,
    share,
    soak_iterations,
)

KINDS = {"git.call": "parent", "fs.write": "child", "store.commit": "child", "saver.put": "child"}
GIT_STRIDE = 4  # every fourth git call by default; every one in the soak


def untimed(resources: dict[str, Any]) -> dict[str, Any]:
    """The resources with the time each team-chat notification was sent left out: a revert of
    the implementation re-makes the announce decision (engine/correct/later_writers.py), which sends
    its notification again, stamped with the moment it is sent — never the reference run's.
    What was sent, to which channel and how many times is still compared."""
    chat = dict(resources.get("real-team-chat", {}))
    if "outbox.jsonl" not in chat:
        return resources
    lines = bytes.fromhex(chat["outbox.jsonl"]).decode("utf-8").splitlines()
    sent = [{k: v for k, v in json.loads(line).items() if k != "time"} for line in lines]
    chat["outbox.jsonl"] = json.dumps(sent, sort_keys=True).encode("utf-8").hex()
    return {**resources, "real-team-chat": chat}


def differences(found: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    """Which resources (and which of their files) differ."""
    out = []
    for key in sorted(expected.keys() | found.keys()):
        mine, theirs = found.get(key), expected.get(key)
        if mine == theirs:
            continue
        if isinstance(mine, dict) and isinstance(theirs, dict):
            files = mine.get("files", mine), theirs.get("files", theirs)
            paths = sorted(
                p for p in files[0].keys() | files[1].keys() if files[0].get(p) != files[1].get(p)
            )
            out.append(f"{key} {paths[:5]}")
        else:
            out.append(f"{key}: {mine!r} != {theirs!r}")
    return out


def judge(
    result: dict[str, Any], before: dict[str, Any], after: dict[str, Any]
) -> tuple[str, str | None]:
    """(the outcome, what is wrong with it or None)."""
    how = f"{result['status']}, plan {result['plan_state']}, error {result['error']}"
    result = {**result, "resources": untimed(result["resources"])}
    before, after = untimed(before), {**after, "resources": untimed(after["resources"])}
    if result["violations"]:
        return "broken", f"{how}: invariants violated: {result['violations']}"
    replayed = result["status"] == "succeeded" or (
        result["status"] == "failed" and result["resumed"]
    )
    if replayed and result["plan_state"] == after["plan_state"]:
        outcome = "completed after resuming" if result["resumed"] else "completed"
        if result["resources"] == after["resources"]:
            return outcome, None
        wrong = differences(result["resources"], after["resources"])
        return outcome, f"{how}: completed, but unlike a correction without faults: {wrong}"
    if result["resources"] != before:
        wrong = differences(result["resources"], before)
        return "broken", f"{how}: failed, but resources changed: {wrong}"
    if not result["tree_unchanged"]:
        return "broken", f"{how}: failed, but the decision tree changed"
    if result["status"] == "failed" and result["plan_state"] != "errored":
        return "broken", f"{how}: failed, but the plan is not errored"
    return "failed cleanly", None


def test_every_external_call_failing_leaves_a_completed_or_a_clean_failed_correction(
    team: list[Worker],
) -> None:
    references: dict[Path, dict[str, tuple[dict[str, Any], dict[str, Any]]]] = {}

    def prepare(worker: Worker) -> None:
        """Per correction, the resources before it and the outcome of it without faults
        (each worker's own: its folder has its own paths and ids)."""
        references[worker.path] = {}
        for which in sorted(set(KINDS.values())):
            worker.restore("gate")
            before = worker.in_child(scenario.snapshot, which)
            after = worker.in_child(scenario.fault_correction, which, "")
            assert after["status"] == "succeeded" and not after["violations"], after
            references[worker.path][which] = before, after

    on_each(team, prepare)
    after = {which: ref[1] for which, ref in references[team[0].path].items()}

    stride = 1 if soak_iterations(0) else GIT_STRIDE
    faults = []
    for kind, which in KINDS.items():
        calls = after[which]["hits"].get(kind, 0)
        assert calls > 0, f"the {which} correction makes no {kind} call"
        faults += [
            (kind, which, n) for n in range(1, calls + 1, stride if kind == "git.call" else 1)
        ]

    def inject(worker: Worker, fault: tuple[str, str, int]) -> tuple[str, str | None]:
        kind, which, n = fault
        worker.restore("gate")
        result = worker.in_child(scenario.fault_correction, which, f"{kind}#{n}=raise")
        outcome, problem = judge(result, *references[worker.path][which])
        return outcome, None if problem is None else f"{kind}#{n} ({which}): {problem}"

    results = share(team, faults, inject)
    failures = [problem for _, problem in results if problem]
    outcomes = [outcome for outcome, _ in results]
    record_figures(
        "fault_loop",
        faults_injected=len(faults),
        by_kind={kind: sum(1 for f in faults if f[0] == kind) for kind in KINDS},
        outcomes={o: outcomes.count(o) for o in sorted(set(outcomes))},
        violations=len(failures),
    )
    assert failures == [], "\n".join(failures)
