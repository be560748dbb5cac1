"""`plan use` says what a new plan leaves out of a git repository: the changes not committed.

The sandbox starts from the last commit, so a person who edited files and did not commit
them would otherwise find the agent working on, and Apply landing on, an older state.
"""

from __future__ import annotations

from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.wording import counted
from cleveragents_tui.sandbox.git.uncommitted import uncommitted
from cleveragents_tui.store.store import Store


def left_out(store: Store, action: Action) -> list[str]:
    """A line for each git resource of ``action`` whose checkout has changes not committed."""
    with store.unit_of_work() as uow:
        registered = {r.resource_id: r for r in uow.resources.registered()}
    lines = []
    for resource_id in action.resources:
        resource = registered.get(resource_id)
        if resource is None or resource.kind != "git":
            continue
        apart = [  # its own resources' files (a database): not left out of the plan
            r.path for r in registered.values() if r is not resource and r.path is not None
        ]
        found = uncommitted(resource, apart)
        if found is None:
            continue
        parts = [
            counted(n, thing)
            for n, thing in ((found.changed, "changed file"), (found.untracked, "new file"))
            if n
        ]
        what = " and ".join(parts)
        lines.append(
            f"{resource_id} has {what} not committed: the plan starts from your last commit, "
            "without them (commit them first to include them)"
        )
    return lines
