"""The world of the correction oracle (test_correction_oracle.py): random actions, the real
resources they write, running a plan to its Apply gate, correcting it, and what Apply landed.

An action here is an ordinary action definition (docs/actions.md, the dict form of the YAML
file ``agents plan use`` reads): a few Strategize points, then Execute points whose
alternatives call the built-in tools (docs/tools.md) on two to four of these resources:

- ``oracle/repo`` (git_worktree), ``oracle/files`` (filesystem_copy) and ``oracle/layers``
  (overlay): write-file (text, NUL bytes, the executable bit), edit-file, delete-file, and
  the tree tools (actors/tree_tools.py): move (a file, link or folder), delete (a folder
  with what is in it), mkdir (an empty folder, with a mode), symlink (inside the resource,
  from the top or a subfolder) and chmod (files and folders);
- ``oracle/repo`` and ``oracle/files`` also run-command with fixed argv, the way a shell
  would do the same (the overlay has no working directory to run it in): rename
  (``mv -f -T``), mode bit (``chmod``), symlink (``ln -sfn``), empty folder (``mkdir -p`` /
  ``rmdir``) and bytes that are not UTF-8 (``sh -c printf``); and run-tests, a check whose
  verdict depends on what the files hold (the parity of every file's checksum), and which
  writes nothing, now and then with a ``fix`` (run-command appending to ``.parity`` until
  the check passes) that each retry of the failed check makes first;
- ``oracle/db`` (transaction_rollback, SQLite): run-sql insert, update and delete on an
  AUTOINCREMENT table and on a plain one.

Every alternative has its own ``match`` word, so guidance names exactly one alternative of
exactly one point. A tool call that fails (a missing file, edit-file finding its text twice)
is part of the example: it fails the same way whenever the state is the same.

Each side of an example (the corrected plan, the fresh plan) gets its own folder: a store
(a copy of a migrated template), copies of the template resources, and its sandboxes.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import DecisionType, Phase
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.engine.run.recoveries import RECOVER
from cleveragents_tui.engine.run.runner import RunOptions
from cleveragents_tui.store.store import Store

REPO, FILES, LAYERS, DB = "oracle/repo", "oracle/files", "oracle/layers", "oracle/db"
WORKDIRS = (REPO, FILES)
STRATEGIES = {
    REPO: ("git", "git_worktree"),
    FILES: ("filesystem", "filesystem_copy"),
    LAYERS: ("filesystem", "overlay"),
    DB: ("database", "transaction_rollback"),
}
# Paths by kind, so a regular file never lands where a folder or a link is expected.
PATHS = ("a.txt", "b.txt", "sub/c.txt", "sub/deep/d.txt", "run.sh")
LINKS = ("l1", "l2")
DIRS = ("e1", "sub/e2")
WORDS = ("alpha", "beta", "gamma", "x", "line")
STRATEGIZE_TYPES = (DecisionType.STRATEGY_CHOICE, DecisionType.INVARIANT_ENFORCED)
EXECUTE_TYPES = (
    DecisionType.IMPLEMENTATION_CHOICE,
    DecisionType.TOOL_INVOCATION,
    DecisionType.RESOURCE_SELECTION,
    DecisionType.ERROR_RECOVERY,
    DecisionType.VALIDATION_RESPONSE,
)
LETTERS = "abc"
# a check any change of a file's bytes flips half the time: passes when the checksum of the
# resource's files (.git aside), in name order, is even
EVEN_CHECKSUM = (
    "find . -name .git -prune -o -type f -print | LC_ALL=C sort | xargs cat | cksum"
    " | grep -q '^[0-9]*[02468] '"
)

# the fix of a failed check: append to .parity until the checksum is even (a byte changes
# the checksum's parity half the time, so it ends in two appends, on average)
FIX_PARITY = f"until {{ {EVEN_CHECKSUM}; }}; do printf x >> .parity; done"


# --- the templates, made once per session ----------------------------------------------------

_TEMPLATES: dict[str, Path] = {}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, timeout=60
    ).stdout


def _seed_folder(path: Path) -> None:
    (path / "sub" / "deep").mkdir(parents=True)
    (path / "a.txt").write_text("alpha\nline\n")
    (path / "sub" / "c.txt").write_text("gamma\nx\n")
    (path / "data.bin").write_bytes(bytes(range(256)))
    (path / "run.sh").write_text("#!/bin/sh\necho run\n")
    (path / "run.sh").chmod(0o755)
    (path / "l1").symlink_to("a.txt")


def templates() -> dict[str, Path]:
    """A migrated empty store, a git repository, a folder and an SQLite database; each side of
    each example copies them."""
    if _TEMPLATES:
        return _TEMPLATES
    root = Path(tempfile.mkdtemp(prefix="agents-oracle-template-"))
    store = Store.open(str(root / "agents.db"))
    store.close()
    repo = root / "repo"
    repo.mkdir()
    _seed_folder(repo)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "oracle@example.invalid")
    _git(repo, "config", "user.name", "Oracle")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "seed")
    folder = root / "files"
    folder.mkdir()
    _seed_folder(folder)
    (folder / "kept-empty").mkdir()
    with sqlite3.connect(root / "app.db") as connection:
        connection.executescript(
            """
            CREATE TABLE items (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL,
                                n INTEGER NOT NULL);
            CREATE TABLE plain (id INTEGER PRIMARY KEY, v TEXT);
            INSERT INTO items (name, n) VALUES ('seed-1', 1), ('seed-2', 2), ('seed-3', 3);
            DELETE FROM items WHERE id = 3;
            INSERT INTO plain (id, v) VALUES (1, 'one'), (5, 'five');
            """
        )
    connection.close()
    _TEMPLATES.update(
        store=root / "agents.db", repo=repo, files=folder, layers=folder, db=root / "app.db"
    )
    return _TEMPLATES


@dataclass
class Side:
    """One plan's world: its store, its real resources, its sandboxes."""

    root: Path
    store: Store
    options: RunOptions
    locations: dict[str, Path]

    @classmethod
    def make(cls, root: Path, budgets: Mapping[str, int] | None = None) -> Side:
        """``budgets``: a checkpoint budget (``checkpoint_max_per_plan``) per resource, where
        not the default."""
        made = templates()
        root.mkdir(parents=True)
        shutil.copyfile(made["store"], root / "agents.db")
        locations = {
            REPO: root / "repo",
            FILES: root / "files",
            LAYERS: root / "layers",
            DB: root / "app.db",
        }
        shutil.copytree(made["repo"], locations[REPO], symlinks=True)
        shutil.copytree(made["files"], locations[FILES], symlinks=True)
        shutil.copytree(made["layers"], locations[LAYERS], symlinks=True)
        shutil.copyfile(made["db"], locations[DB])
        store = Store.open(str(root / "agents.db"))
        with store.unit_of_work(write=True) as uow:
            for resource_id, (kind, strategy) in STRATEGIES.items():
                uow.resources.add(
                    Resource(
                        resource_id=resource_id,
                        kind=kind,
                        location=str(locations[resource_id]),
                        sandbox_strategy=strategy,
                        **(
                            {"checkpoint_max_per_plan": budgets[resource_id]}
                            if budgets and resource_id in budgets
                            else {}
                        ),
                    )
                )
            uow.commit()
        return cls(root, store, RunOptions(sandbox_base=root / "sandboxes"), locations)

    def close(self) -> None:
        self.store.close()

    def current(self, plan_id: str) -> dict[str, Decision]:
        """The plan's current decisions made from the action's points, by key (not the
        recovery decisions of a failed call: ``recover:…``, engine/run/failures.py)."""
        with self.store.unit_of_work() as uow:
            return {
                d.step_key: d
                for d in uow.decisions.for_plan(plan_id, include_superseded=False)
                if d.step_key
                and not d.step_key.startswith(f"{RECOVER}:")
                and d.decision_type
                not in (DecisionType.PROMPT_DEFINITION, DecisionType.USER_INTERVENTION)
            }

    def verdicts(self, plan_id: str) -> dict[str, list[tuple[str, bool | None]]]:
        """How each current point's own test runs went (``local/run-tests``, by key), and
        each current retry's fix and test run (by its ``recover:`` key): a check's verdict
        is about the files it ran on, so a corrected plan's must be a fresh plan's."""
        with self.store.unit_of_work() as uow:
            current = {
                d.step_key: d
                for d in uow.decisions.for_plan(plan_id, include_superseded=False)
                if d.step_key
                and d.phase is Phase.EXECUTE
                and d.decision_type is not DecisionType.USER_INTERVENTION  # a correction's own
            }
            return {
                key: [
                    (call.tool, call.ok)
                    for call in uow.tool_invocations.for_decision(d.decision_id)
                    if call.tool == "local/run-tests" or key.startswith(f"{RECOVER}:")
                ]
                for key, d in current.items()
            }

    def fixes_made(self, plan_id: str) -> int:
        """The fixes the plan's current retries made (the ``fix`` of a failed check)."""
        runs = self.verdicts(plan_id)
        return sum(
            1
            for key, calls in runs.items()
            if key.startswith(f"{RECOVER}:")
            for tool, _ in calls
            if tool == "local/run-command"
        )

    def applied(self) -> dict[str, Any]:
        """What Apply landed on the real resources, comparable between two sides."""
        return {
            REPO: git_tree(self.locations[REPO]),
            FILES: folder_dump(self.locations[FILES]),
            LAYERS: folder_dump(self.locations[LAYERS]),
            DB: database_dump(self.locations[DB]),
        }


# --- what Apply landed ------------------------------------------------------------------------


def git_tree(repo: Path) -> dict[str, Any]:
    """The applied branch's tree: path -> (mode, content); a symlink's content is its target.
    Git keeps no empty folder and of the mode only the executable bit (docs/sandboxes.md)."""
    branches = _git(repo, "for-each-ref", "--format=%(refname)", "refs/heads/cleveragents/apply")
    names = branches.split()
    if len(names) != 1:
        return {"<apply branches>": names}
    listing = _git(repo, "ls-tree", "-r", "-z", names[0])
    tree: dict[str, Any] = {}
    for entry in filter(None, listing.split("\0")):
        meta, path = entry.split("\t", 1)
        mode, _, sha = meta.split()
        blob = subprocess.run(
            ["git", "-C", str(repo), "cat-file", "blob", sha], check=True, capture_output=True
        ).stdout
        tree[path] = (mode, blob)
    return tree


def folder_dump(root: Path) -> dict[str, Any]:
    """Every path under ``root``: a file's mode and bytes, a link's target, a folder (empty
    or not)."""
    found: dict[str, Any] = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if path.is_symlink():
            found[relative] = ("link", str(path.readlink()))
        elif path.is_dir():
            found[relative] = ("folder", oct(path.stat().st_mode & 0o7777))
        else:
            found[relative] = ("file", oct(path.stat().st_mode & 0o7777), path.read_bytes())
    return found


def database_dump(path: Path) -> dict[str, Any]:
    """Every table's rows in rowid order, ``sqlite_sequence`` included, and the schema."""
    connection = sqlite3.connect(path)
    try:
        tables = [
            name
            for (name,) in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            )
        ]
        dump: dict[str, Any] = {
            "schema": connection.execute(
                "SELECT type, name, sql FROM sqlite_master ORDER BY name"
            ).fetchall()
        }
        for table in tables:
            order = "name" if table == "sqlite_sequence" else "rowid"
            dump[table] = connection.execute(f'SELECT * FROM "{table}" ORDER BY {order}').fetchall()
        return dump
    finally:
        connection.close()


def differences(left: Mapping[str, Any], right: Mapping[str, Any]) -> list[str]:
    """One line per resource path (or table) that differs: what each side has."""
    lines: list[str] = []
    for resource in left:
        a, b = left[resource], right[resource]
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                lines.append(f"{resource} {key}: corrected={a.get(key)!r} fresh={b.get(key)!r}")
    return lines


# --- random actions ---------------------------------------------------------------------------


def _text() -> st.SearchStrategy[str]:
    line = st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join)
    return st.lists(line, min_size=0, max_size=3).map(lambda ls: "".join(f"{x}\n" for x in ls))


def _workdir_call(resource: str) -> st.SearchStrategy[dict[str, Any]]:
    def command(argv: list[str]) -> dict[str, Any]:
        return {"tool": "local/run-command", "arguments": {"resource": resource, "argv": argv}}

    path, link, folder = st.sampled_from(PATHS), st.sampled_from(LINKS), st.sampled_from(DIRS)
    raw = st.lists(st.sampled_from((0, 1, 127, 128, 255)), min_size=1, max_size=4)
    return st.one_of(
        _file_call(resource),
        _tree_call(resource),
        st.tuples(path, path)
        .filter(lambda p: p[0] != p[1])
        .map(lambda p: command(["mv", "-f", "-T", p[0], p[1]])),
        st.tuples(st.sampled_from(("+x", "-x")), path).map(lambda m: command(["chmod", *m])),
        st.tuples(path, link).map(lambda t: command(["ln", "-sfn", t[0], t[1]])),
        folder.map(lambda d: command(["mkdir", "-p", d])),
        folder.map(lambda d: command(["rmdir", d])),
        st.tuples(path, raw).map(
            lambda t: command(
                ["sh", "-c", "printf '" + "".join(f"\\{b:03o}" for b in t[1]) + f"' > {t[0]}"]
            )
        ),
    )


def check_call(resource: str) -> st.SearchStrategy[dict[str, Any]]:
    """A run of local/run-tests on a resource with a working directory: a check whose
    verdict depends on what its files hold, and which writes nothing (a check that fails is
    retried and accepted, as any failed call: one that passes half the time keeps that
    cheap)."""

    def check(argv: list[str]) -> dict[str, Any]:
        return {"tool": "local/run-tests", "arguments": {"resource": resource, "argv": argv}}

    return st.just(check(["sh", "-c", EVEN_CHECKSUM]))


def parity_fix(resource: str) -> dict[str, Any]:
    """The fix a failed check's retry makes first: the files changed until the check passes."""
    argv = ["sh", "-c", FIX_PARITY]
    return {"tool": "local/run-command", "arguments": {"resource": resource, "argv": argv}}


def _file_call(resource: str) -> st.SearchStrategy[dict[str, Any]]:
    def call(tool: str, **arguments: Any) -> dict[str, Any]:
        return {"tool": tool, "arguments": {"resource": resource, **arguments}}

    path = st.sampled_from(PATHS)
    return st.one_of(
        st.tuples(path, _text()).map(lambda t: call("local/write-file", path=t[0], content=t[1])),
        st.tuples(path, _text(), st.booleans()).map(
            lambda t: call("local/write-file", path=t[0], content=t[1], executable=t[2])
        ),
        st.tuples(path, st.sampled_from(("\0", "\0\x01\x7f\0"))).map(
            lambda t: call("local/write-file", path=t[0], content=f"bin{t[1]}")
        ),
        st.tuples(path, st.sampled_from(WORDS), st.sampled_from(WORDS)).map(
            lambda t: call("local/edit-file", path=t[0], old=t[1], new=t[2])
        ),
        path.map(lambda p: call("local/delete-file", path=p)),
    )


# What the tree tools work on: every kind of path the other calls make, and a folder; a call
# that finds the wrong kind (or an existing destination) is refused, the same on both sides.
TREE_PATHS = (*PATHS, *LINKS, *DIRS, "sub")
FILE_MODES = ("0644", "0755", "0600", "0700")
FOLDER_MODES = ("0755", "0700", "0750")


def _tree_call(resource: str) -> st.SearchStrategy[dict[str, Any]]:
    """A call of a tree tool: move, delete, mkdir, symlink or chmod."""

    def call(tool: str, **arguments: Any) -> dict[str, Any]:
        return {"tool": tool, "arguments": {"resource": resource, **arguments}}

    anything = st.sampled_from(TREE_PATHS)
    link = st.sampled_from((*LINKS, "sub/l3"))
    return st.one_of(
        st.tuples(anything, st.sampled_from((*PATHS, *DIRS, "moved", "sub/moved")))
        .filter(lambda t: t[0] != t[1])
        .map(lambda t: call("local/move", **{"from": t[0], "to": t[1]})),
        anything.map(lambda p: call("local/delete", path=p)),
        st.tuples(st.sampled_from((*DIRS, "sub/e2/e3")), st.sampled_from(FOLDER_MODES)).map(
            lambda t: call("local/mkdir", path=t[0], mode=t[1])
        ),
        st.tuples(link, st.sampled_from(PATHS)).map(
            lambda t: call("local/symlink", path=t[0], target=("../" if "/" in t[0] else "") + t[1])
        ),
        st.tuples(anything, st.sampled_from((*FILE_MODES, *FOLDER_MODES))).map(
            lambda t: call("local/chmod", path=t[0], mode=t[1])
        ),
    )


def _sql_call() -> st.SearchStrategy[dict[str, Any]]:
    def sql(statement: str, **params: Any) -> dict[str, Any]:
        arguments: dict[str, Any] = {"resource": DB, "sql": statement}
        if params:
            arguments["params"] = params
        return {"tool": "local/run-sql", "arguments": arguments}

    small = st.integers(0, 9)
    return st.one_of(
        st.tuples(st.sampled_from(WORDS), small).map(
            lambda t: sql("INSERT INTO items (name, n) VALUES (:name, :n)", name=t[0], n=t[1])
        ),
        st.tuples(small, st.integers(0, 1)).map(
            lambda t: sql("UPDATE items SET n = n + :d WHERE id % 2 = :r", d=t[0], r=t[1])
        ),
        st.just(sql("DELETE FROM items WHERE id = (SELECT max(id) FROM items)")),
        small.map(lambda n: sql("DELETE FROM items WHERE n < :n", n=n)),
        st.tuples(st.integers(1, 6), st.sampled_from(WORDS)).map(
            lambda t: sql("INSERT OR REPLACE INTO plain (id, v) VALUES (:id, :v)", id=t[0], v=t[1])
        ),
        st.integers(1, 6).map(lambda i: sql("DELETE FROM plain WHERE id = :id", id=i)),
    )


def tool_call(resources: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    """A write to one of ``resources``."""
    calls = {
        REPO: _workdir_call(REPO),
        FILES: _workdir_call(FILES),
        LAYERS: st.one_of(_file_call(LAYERS), _tree_call(LAYERS)),
        DB: _sql_call(),
    }
    return st.one_of(*(calls[r] for r in resources))


def key_of(number: int) -> str:
    return f"d{number:02d}"


def match_word(key: str, letter: str) -> str:
    """The word that steers guidance to one alternative of one point, and only there."""
    return f"pick{key}{letter}"


@st.composite
def actions(draw: st.DrawFn, min_points: int = 5, max_points: int = 30) -> dict[str, Any]:
    """An action definition: 1–3 Strategize points, then Execute points, each with 2–3
    alternatives; random parents and influence edges to earlier points, and now and then a
    point that exists only for one option of an earlier one (``when``, as the demo's
    implement-function and implement-class). A conditional point is nobody's parent: its
    children would have no parent when it is skipped."""
    total = draw(st.integers(min_points, max_points))
    strategize = draw(st.integers(1, min(3, total - 2)))
    # Each action uses two to four of the resources: a plan pays for every sandbox it opens.
    resources = sorted(draw(st.sets(st.sampled_from(sorted(STRATEGIES)), min_size=2)))
    points: list[dict[str, Any]] = []
    for number in range(total):
        key = key_of(number)
        earlier = [p["key"] for p in points]
        parents = [p["key"] for p in points if "when" not in p]
        execute = number >= strategize
        kind = draw(st.sampled_from(EXECUTE_TYPES if execute else STRATEGIZE_TYPES))
        # now and then an Execute point only runs checks (a test run after the writes)
        checked = [r for r in resources if r in WORKDIRS]
        checking = bool(execute and checked and draw(st.integers(0, 3)) == 0)
        made = st.one_of(*map(check_call, checked)) if checking else tool_call(resources)
        fixing = checking and draw(st.booleans())  # its failed checks are fixed, then rerun
        alternatives = []
        for letter in LETTERS[: draw(st.integers(2, 3))]:
            calls = draw(st.lists(made, min_size=int(checking), max_size=3)) if execute else []
            alternative: dict[str, Any] = {
                "option": f"{key} option {letter}",
                "match": [match_word(key, letter)],
                "tool_calls": calls,
            }
            if fixing:
                fixed = dict.fromkeys(c["arguments"]["resource"] for c in calls)
                alternative["fix"] = [parity_fix(r) for r in fixed]
            alternatives.append(alternative)
        point: dict[str, Any] = {
            "key": key,
            "type": kind.value,
            "question": f"What does {key} do?",
            "alternatives": alternatives,
        }
        # a check stands on its own (under the root, depending on nothing): whether a revert
        # runs it again then rests on what it checked alone, not on a link to the correction
        if parents and not checking:
            under = draw(st.sampled_from([None, *parents]))
            if under is not None:
                point["parent"] = under
        if earlier and not checking:
            depends = draw(st.lists(st.sampled_from(earlier), max_size=2, unique=True))
            if depends:
                point["depends_on"] = depends
            if draw(st.integers(0, 3)) == 0:
                upon = draw(st.sampled_from(points))
                option = draw(st.sampled_from([a["option"] for a in upon["alternatives"]]))
                point["when"] = {upon["key"]: option}
        points.append(point)
    return {
        "name": "oracle/action",
        "prompt": "change the resources as the points say",
        "resources": resources,
        "decisions": points,
    }


def with_choices(definition: Mapping[str, Any], chosen: Mapping[str, str]) -> dict[str, Any]:
    """The same action with each point in ``chosen`` taking that option from the start."""
    points = []
    for point in definition["decisions"]:
        point = dict(point)
        if point["key"] in chosen:
            point["choose"] = chosen[point["key"]]
        points.append(point)
    return {**definition, "decisions": points}


def with_corrective_work(
    definition: Mapping[str, Any], chosen: Mapping[str, str], key: str, option: str
) -> dict[str, Any]:
    """The append oracle's fresh action: the plan's own points with the plan's choices, then
    the corrective work appended at ``key`` with guidance selecting ``option`` — a copy of
    that point taking ``option``, and copies of the points that exist only for a choice of
    it (``when``, transitively), in file order, after all of the plan's own work."""
    copied = {key}
    for point in definition["decisions"]:
        if copied & set(point.get("when", {})):
            copied.add(point["key"])
    work = []
    for point in definition["decisions"]:
        if point["key"] not in copied:
            continue
        copy = {
            k: v for k, v in point.items() if k not in ("parent", "depends_on", "when", "choose")
        }
        copy["key"] = f"x{point['key']}"
        copy["when"] = {f"x{k}": v for k, v in point.get("when", {}).items() if k in copied}
        if point["key"] == key:
            copy["choose"] = option
        work.append(copy)
    own = with_choices(definition, chosen)
    return {**own, "decisions": [*own["decisions"], *work]}
