"""The apply branch a plan leaves in the user's repository (``cleveragents/apply/<plan>``):
whether it exists and is merged, and removing it when the user discards the plan.

Only refs under ``refs/heads/cleveragents/apply/`` are ever touched; the user's HEAD, index
and working tree never are.
"""

from __future__ import annotations

from dataclasses import dataclass

from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.git.process import FSCK, base_env
from cleveragents_tui.sandbox.git.repository import (
    Names,
    Repository,
    deletions,
    short_ref,
    subject_of,
)


@dataclass(frozen=True)
class ApplyBranch:
    plan_id: str
    resource_id: str
    repository: str
    branch: str  # e.g. cleveragents/apply/<plan>
    merged: bool  # reachable from the repository's HEAD: deleting it loses no commit


def find_apply_branch(resource: Resource, plan_id: str) -> ApplyBranch | None:
    """The plan's apply branch in ``resource``'s repository, or None if there is none."""
    names = Names.for_plan(plan_id)
    repository = Repository.find(resource, subject_of(resource, plan_id), base_env())
    git = repository.git
    if git.call("rev-parse", "--verify", "--quiet", names.apply_branch).returncode != 0:
        return None
    merged = git.call("merge-base", "--is-ancestor", names.apply_branch, "HEAD").returncode == 0
    return ApplyBranch(
        plan_id=plan_id,
        resource_id=resource.resource_id,
        repository=str(repository.location),
        branch=short_ref(names.apply_branch),
        merged=merged,
    )


def delete_apply_branch(resource: Resource, plan_id: str) -> None:
    names = Names.for_plan(plan_id)
    repository = Repository.find(resource, subject_of(resource, plan_id), base_env())
    repository.git.run(
        "update-ref", "--stdin", stdin=deletions([names.apply_branch]).encode(), fix=FSCK
    )
