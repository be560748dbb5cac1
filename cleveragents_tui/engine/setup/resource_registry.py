"""Registering the resources plans may change: ``agents resource add/list/show/remove``.

Everything is checked before anything is stored, and each refusal is one line naming the
problem and the fix: an unknown kind or strategy, a name taken, a location that is not
there (a repository without commits, a database that does not answer), a location inside
the app's own data (its database, its sandboxes) or overlapping another resource. Nothing
here writes to the resource itself — registering a repository never touches its index or
working tree.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from cleveragents_tui.automation.precedence import GLOBAL_SCOPE
from cleveragents_tui.automation.preflight import reachability_problem
from cleveragents_tui.domain.display import shorten
from cleveragents_tui.domain.enums import PlanState, SandboxStrategyName
from cleveragents_tui.domain.errors import NotFoundError, UserError
from cleveragents_tui.domain.ids import NAMESPACED_NAME
from cleveragents_tui.domain.resource import DEFAULT_CHECKPOINT_BUDGET, Resource, without_password
from cleveragents_tui.store.store import Store

CHECKPOINTS_ENABLED_KEY = "sandbox.checkpoint.enabled"
CHECKPOINT_BUDGET_KEY = "sandbox.checkpoint.max-per-plan"
DEFAULT_NAMESPACE = "local"

# The strategy each kind gets unless --strategy says otherwise, then the others it accepts.
STRATEGIES: dict[str, tuple[SandboxStrategyName, ...]] = {
    "git": (SandboxStrategyName.GIT_WORKTREE, SandboxStrategyName.NONE),
    "filesystem": (
        SandboxStrategyName.FILESYSTEM_COPY,
        SandboxStrategyName.OVERLAY,
        SandboxStrategyName.NONE,
    ),
    # A SQLite file gets a copy, a PostgreSQL database a transaction (sandbox/database.py).
    "database": (SandboxStrategyName.TRANSACTION_ROLLBACK, SandboxStrategyName.NONE),
    "external": (SandboxStrategyName.NONE,),
}
KINDS = tuple(STRATEGIES)


@dataclass(frozen=True)
class ResourceUse:
    """A plan whose action names the resource."""

    plan_id: str
    state: PlanState


def resource_name(raw: str) -> str:
    """``NAME`` or ``namespace/NAME``; a bare name goes in the ``local`` namespace."""
    name = raw if "/" in raw else f"{DEFAULT_NAMESPACE}/{raw}"
    if not NAMESPACED_NAME.match(name):
        raise UserError(
            f"resource name {shorten(raw)!r} is not valid",
            "use NAME or NAMESPACE/NAME: letters, digits, '.', '_', '-' (each part starts with "
            "a letter or digit)",
        )
    return name


def data_folders(store: Store) -> list[Path]:
    """What belongs to the app: its data folder, its sandboxes, the store's database file."""
    from platformdirs import user_data_path

    from cleveragents_tui.engine.core.sandboxes import sandbox_base_dir

    folders = [user_data_path("cleveragents", appauthor=False), sandbox_base_dir()]
    database = store.engine.url.database
    if store.engine.url.get_backend_name() == "sqlite" and database:
        folders.append(Path(database))
    return [_resolved(f) for f in folders]


def _resolved(path: Path) -> Path:
    return path.expanduser().resolve()


def _within(inner: Path, outer: Path) -> bool:
    return inner == outer or outer in inner.parents


def _git(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Read-only git (no optional locks: not even the index's stat refresh)."""
    return subprocess.run(
        ["git", "-C", str(path), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
    )


def repository_top(folder: Path) -> Path | None:
    """The top folder of the git working tree ``folder`` is in, or None."""
    probe = _git(folder, "rev-parse", "--show-toplevel")
    if probe.returncode != 0 or not probe.stdout.strip():
        return None
    return _resolved(Path(probe.stdout.strip()))


def _check_git(path: Path) -> None:
    top = repository_top(path)
    if top is None:
        raise UserError(f"{path} is not a git repository", "give the folder of a git repository")
    if top != path:
        raise UserError(f"{path} is inside the git repository {top}", f"give {top} itself")
    if _git(path, "rev-parse", "--verify", "-q", "HEAD^{commit}").returncode != 0:
        raise UserError(
            f"the git repository {path} has no commit yet",
            "commit something first: sandboxes start from the last commit",
        )


def _path_location(kind: str, raw: str) -> Path:
    try:
        path = _resolved(Path(raw))
    except (OSError, RuntimeError, ValueError) as exc:
        raise UserError(
            f"location {shorten(raw)!r} is not a usable path ({exc})", "give an existing path"
        ) from exc
    if not path.exists():
        raise UserError(f"location {path} does not exist", "give an existing path")
    if kind in ("git", "filesystem") and not path.is_dir():
        raise UserError(f"location {path} is not a folder", f"a {kind} resource is a folder")
    return path


def _is_url(raw: str) -> bool:
    return "://" in raw


def _sqlite_header(path: Path) -> bool:
    """An empty file (SQLite makes it a database) or one that starts as SQLite files do;
    SQLite itself would only notice at the first query that reads a table."""
    with path.open("rb") as file:
        head = file.read(16)
    return head in (b"", b"SQLite format 3\x00")


def normalise_location(store: Store, kind: str, raw: str) -> str:
    """The location as stored: an absolute path, or a database/external URL as given (never
    with a password: it would be stored, and shown to everyone who reads this database)."""
    if _is_url(raw) and without_password(raw) != raw:
        raise UserError(
            f"the location {without_password(raw)} holds a password, which agents would store "
            "and show",
            "leave it out of the URL: for PostgreSQL, put it in ~/.pgpass or PGPASSWORD, which "
            "every connection reads",
        )
    if kind == "database" and _is_url(raw):
        from cleveragents_tui.store.database import normalise_url

        url = normalise_url(raw)
        backend = url.get_backend_name()
        if backend == "sqlite":
            raw = url.database or ""
        elif backend != "postgresql":
            raise UserError(
                f"database URL {shorten(raw)!r} is neither SQLite nor PostgreSQL",
                "give a SQLite file or a postgresql://USER@HOST/DB URL",
            )
        else:
            mine = store.engine.url
            if (mine.get_backend_name(), mine.host, mine.port, mine.database) == (
                backend,
                url.host,
                url.port,
                url.database,
            ):
                raise UserError(
                    f"{url.render_as_string()} is the app's own database",
                    "register the database your project uses, not the one agents keeps",
                )
            return raw
    if kind == "external" and _is_url(raw):
        return raw
    path = _path_location(kind, raw)
    if kind == "database" and not path.is_file():
        raise UserError(f"location {path} is not a file", "a database resource is a SQLite file")
    if kind == "database" and not _sqlite_header(path):
        raise UserError(
            f"{path} is not a SQLite database", "give a SQLite file or a postgresql:// URL"
        )
    for folder in data_folders(store):
        if _within(path, folder) or _within(folder, path):
            where = "inside" if _within(path, folder) else "holding"
            raise UserError(
                f"location {path} is {where} the app's own data ({folder})",
                "register your project's files; the app keeps its database and sandboxes there",
            )
    return str(path)


def _overlap(store: Store, kind: str, location: str) -> None:
    """Refuse a location inside (or around) another resource's, unless one of the two is a
    git repository: its sandbox and Apply work on commits and a branch, never on the
    working tree, so a folder or database file kept in it does not collide with it."""
    if _is_url(location):
        return
    path = Path(location)
    with store.unit_of_work() as uow:
        others = uow.resources.registered()
    for other in others:
        if _is_url(other.location) or "git" in (kind, other.kind):
            continue
        there = _resolved(Path(other.location))
        if _within(path, there):
            raise UserError(
                f"location {path} is inside resource {other.resource_id} ({there}): two "
                "sandboxes of the same files would overwrite each other on Apply",
                f"keep it out of {there}, or make that folder a git repository (git init and "
                f"a commit, then agents resource remove {other.resource_id} and agents init "
                "there): a repository's sandbox never writes its working tree, so what is in "
                "it may be a resource of its own",
            )
        if _within(there, path):
            raise UserError(
                f"location {path} is around resource {other.resource_id} ({there}): two "
                "sandboxes of the same files would overwrite each other on Apply",
                f"give a folder that holds no other resource, or make {path} a git repository "
                "(git init and a commit) and add it with --kind git: a repository's sandbox "
                "never writes its working tree",
            )


def _default(store: Store, key: str) -> object | None:
    with store.unit_of_work() as uow:
        return uow.settings.get(GLOBAL_SCOPE, key)


def add_resource(
    store: Store,
    name: str,
    *,
    kind: str,
    location: str,
    strategy: str | None = None,
    checkpoints: bool | None = None,
    max_checkpoints: int | None = None,
) -> Resource:
    """Check everything, then store the resource (nothing is stored on any refusal).

    Unset checkpoint options take the global ``sandbox.checkpoint.*`` settings, else the
    built-in defaults (on, 50 per plan)."""
    resource_id = resource_name(name)
    if kind not in STRATEGIES:
        raise UserError(f"unknown kind {shorten(kind)!r}", f"use one of: {', '.join(KINDS)}")
    allowed = STRATEGIES[kind]
    chosen = allowed[0]
    if strategy is not None:
        chosen = next((s for s in allowed if s.value == strategy), None)  # type: ignore[assignment]
        if chosen is None:
            raise UserError(
                f"strategy {shorten(strategy)!r} does not fit a {kind} resource",
                f"use one of: {', '.join(s.value for s in allowed)}",
            )
    with store.unit_of_work() as uow:
        taken = next((r for r in uow.resources.all() if r.resource_id == resource_id), None)
        removed = taken is not None and uow.resources.is_removed(resource_id)
    if taken is not None:
        if removed:
            raise UserError(
                f"the name {resource_id} belonged to a removed resource that plans still name",
                "choose another name",
            )
        raise UserError(
            f"resource {resource_id} already exists ({taken.kind} at {taken.location})",
            f"choose another name, or remove it first: agents resource remove {resource_id}",
        )
    stored_location = normalise_location(store, kind, location)
    if kind == "git":
        _check_git(Path(stored_location))
    _overlap(store, kind, stored_location)
    enabled = (
        checkpoints if checkpoints is not None else _checked_default(store, CHECKPOINTS_ENABLED_KEY)
    )
    budget = (
        max_checkpoints
        or _checked_default(store, CHECKPOINT_BUDGET_KEY)
        or DEFAULT_CHECKPOINT_BUDGET
    )
    try:
        resource = Resource(
            resource_id=resource_id,
            kind=kind,
            location=stored_location,
            sandbox_strategy=chosen,
            checkpoint_enabled=True if enabled is None else bool(enabled),
            checkpoint_max_per_plan=int(budget),
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UserError(
            f"resource {resource_id}: {'.'.join(map(str, first['loc']))}: {first['msg']}",
            "see docs/resources.md",
        ) from exc
    if kind == "database":
        from cleveragents_tui.sandbox.database_probe import postgres_problem

        problem = (
            postgres_problem(stored_location)
            if _is_url(stored_location)
            else reachability_problem(resource)
        )
        if problem is not None:
            raise UserError(problem, "check the location, and that the database is running")
    with store.unit_of_work(write=True) as uow:
        uow.resources.add(resource)
        uow.events.append(
            "resource_added",
            {"resource": resource_id, "kind": kind, "strategy": chosen.value},
            actor="agents resource add",
        )
        uow.commit()
    return resource


def get_resource(store: Store, name: str) -> Resource:
    resource_id = resource_name(name)
    with store.unit_of_work() as uow:
        found = {r.resource_id: r for r in uow.resources.registered()}
    if resource_id not in found:
        raise NotFoundError(
            f"resource {resource_id} is not registered", "list them with `agents resource list`"
        )
    return found[resource_id]


def list_resources(store: Store) -> list[Resource]:
    with store.unit_of_work() as uow:
        return uow.resources.registered()


def resource_uses(store: Store, resource_id: str) -> list[ResourceUse]:
    with store.unit_of_work() as uow:
        return [ResourceUse(p, s) for p, s in uow.resources.plans_using(resource_id)]


def actions_naming(store: Store, resource_id: str) -> list[str]:
    """Registered actions (or their subactions) that list the resource."""
    with store.unit_of_work() as uow:
        stored = uow.actions.all()
    return [a.name for a in stored if resource_id in _resources_of(a.definition)]


def _resources_of(definition: dict[str, object]) -> set[str]:
    named = {str(r) for r in definition.get("resources") or () if isinstance(r, str)}  # type: ignore[attr-defined]
    for sub in definition.get("subactions") or ():  # type: ignore[attr-defined]
        if isinstance(sub, dict):
            named |= _resources_of(sub)
    return named


def remove_resource(store: Store, name: str) -> bool:
    """Remove the resource; refused while a plan that is not finished uses it. Returns True
    when it was deleted, False when plans used it and it is kept, marked removed, for them."""
    resource = get_resource(store, name)
    busy = [u for u in resource_uses(store, resource.resource_id) if not u.state.is_terminal]
    if busy:
        first = busy[0]
        more = f" (and {len(busy) - 1} more)" if len(busy) > 1 else ""
        raise UserError(
            f"resource {resource.resource_id} is used by plan {first.plan_id} "
            f"({first.state.value}), which is not finished{more}",
            f"apply or cancel it first: agents plan cancel {first.plan_id}",
        )
    with store.unit_of_work(write=True) as uow:
        deleted = uow.resources.remove(resource.resource_id)
        uow.events.append(
            "resource_removed",
            {"resource": resource.resource_id, "kept_for_history": not deleted},
            actor="agents resource remove",
        )
        uow.commit()
    return deleted


# -- sandbox.checkpoint.* : global defaults for new resources, or one resource's own value ---

SANDBOX_SETTINGS: dict[str, str] = {
    CHECKPOINTS_ENABLED_KEY: "checkpoint at every Execute decision: true (default) or false; "
    "globally: for resources added later; --resource R: that resource",
    CHECKPOINT_BUDGET_KEY: "checkpoints a resource keeps per plan (2-10000, default "
    f"{DEFAULT_CHECKPOINT_BUDGET}); globally: for resources added later; --resource R: that one",
}
_TRUE = ("true", "on", "yes", "1")
_FALSE = ("false", "off", "no", "0")


def sandbox_setting_value(key: str, text: str) -> bool | int:
    """The value of a ``sandbox.checkpoint.*`` setting, checked."""
    if key == CHECKPOINTS_ENABLED_KEY:
        if text.strip().lower() in _TRUE + _FALSE:
            return text.strip().lower() in _TRUE
        raise UserError(f"{key} must be true or false, not {shorten(text)!r}", "give true or false")
    try:
        budget = int(text)
    except ValueError:
        budget = 0
    if not 2 <= budget <= 10_000:
        raise UserError(
            f"{key} must be a whole number from 2 to 10000, not {shorten(text)!r}",
            f"give e.g. {DEFAULT_CHECKPOINT_BUDGET}",
        )
    return budget


def sandbox_default_text(key: str, text: str, scope: str) -> str:
    """A global ``sandbox.checkpoint.*`` default, as stored (``true``, ``false``, ``50``)."""
    if scope != GLOBAL_SCOPE:
        raise UserError(
            f"{key} is set globally or per resource, not per project",
            f"drop --project, or give a resource: agents config set {key} {text} --resource NAME",
        )
    value = sandbox_setting_value(key, text)
    return str(value).lower() if isinstance(value, bool) else str(value)


def _checked_default(store: Store, key: str) -> bool | int | None:
    stored = _default(store, key)
    return None if stored is None else sandbox_setting_value(key, str(stored))


def resource_setting(store: Store, name: str, key: str) -> bool | int:
    resource = get_resource(store, name)
    if key == CHECKPOINTS_ENABLED_KEY:
        return resource.checkpoint_enabled
    return resource.checkpoint_max_per_plan


def set_resource_setting(store: Store, name: str, key: str, text: str | None) -> bool | int:
    """Set one resource's checkpointing (``text`` None: back to the global default). Turning
    checkpoints on or off is refused while a plan that is not finished uses the resource: its
    decisions would be checkpointed in part, and a rollback would miss what the others did."""
    resource = get_resource(store, name)
    if text is None:
        fallback = True if key == CHECKPOINTS_ENABLED_KEY else DEFAULT_CHECKPOINT_BUDGET
        stored = _checked_default(store, key)
        value = fallback if stored is None else stored
    else:
        value = sandbox_setting_value(key, text)
    if key == CHECKPOINTS_ENABLED_KEY and value != resource.checkpoint_enabled:
        busy = [u for u in resource_uses(store, resource.resource_id) if not u.state.is_terminal]
        if busy:
            raise UserError(
                f"resource {resource.resource_id} is used by plan {busy[0].plan_id} "
                f"({busy[0].state.value}), which is not finished: its decisions would be "
                "checkpointed only in part",
                f"cancel it first (agents plan cancel {busy[0].plan_id}), then run the action again",
            )
    with store.unit_of_work(write=True) as uow:
        if key == CHECKPOINTS_ENABLED_KEY:
            uow.resources.set_checkpoints(resource.resource_id, enabled=bool(value))
        else:
            uow.resources.set_checkpoints(resource.resource_id, max_per_plan=int(value))
        uow.events.append(
            "setting_changed",
            {"scope": f"resource:{resource.resource_id}", "key": key, "value": value},
        )
        uow.commit()
    return value


def resource_scope(key: str, name: str, project: str | None) -> str:
    """``resource:NS/NAME`` for ``agents config … --resource NAME``, once the key and the
    resource are checked."""
    if key not in SANDBOX_SETTINGS:
        raise UserError(
            f"{shorten(key)} is not a resource setting",
            f"--resource goes with {' or '.join(SANDBOX_SETTINGS)}; drop it for other settings",
        )
    if project is not None:
        raise UserError("--project and --resource name two scopes", "give one of them")
    return f"resource:{resource_name(name)}"
