"""Hostile input: the action-file parser, the profile parser and the restore of the directory
sandboxes, fuzzed and fed a corpus of known tricks (issue 9, item 7).

The promise: every input gives a clear error — a ``UserError`` (``PreflightError``,
``ProfileError``, ``UnsafeInputError``, ``SandboxError``, ``CheckpointMissingError``) whose
message is one line — or a correct result, never a traceback of another kind; and canary
files outside the sandbox never change (their bytes and times are compared before and after).

What the earlier suites cover is not repeated: tests/automation/test_profile_registry.py has
one bad profile file per kind of mistake; tests/sandbox/test_filesystem_copy.py and
test_overlay.py plant one hand-written hostile tree or layer record per trick. Here:

- random bytes, random YAML assembled from YAML's own syntax, random documents and random
  mutations of a valid action / every built-in profile go through ``load_action`` and
  ``load_profile_file``; what is accepted must round-trip through its model;
- random checkpoint trees (nasty names, kinds, modes, sizes, references, link targets) are
  planted in a ``filesystem_copy`` sandbox whose folder holds traps — a symlink and a hard
  link to the canaries, a FIFO — and rolled back, then applied to a real folder that holds
  the same traps; what is accepted must rescan to exactly the planted tree;
- random layer records are planted in an ``overlay`` sandbox and opened;
- a corpus of archive traversal tricks that go beyond the sandbox suites' (overlong and
  unencodable names, Unicode twins, case twins, nested ``.git``, Windows separators, lying
  sizes, a FIFO, a device file or a hard link in the way, links deep in the tree, a restore
  nested too deep, damaged layer logs) and of parser tricks (YAML alias bombs, deep nesting,
  Python tags that would write a canary, huge integers, impossible dates, NUL bytes, BOMs,
  UTF-16, overlong and impossible paths).

Settings: derandomized, no example database (the same inputs in every CI run);
``HYPOTHESIS_PROFILE=soak`` tries twenty times more, randomly. Figures (inputs tried,
accepted, refused, per target) go to ``hostile_input.json``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import stat
import tempfile
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cleveragents_tui.automation.profiles import load_profile_file, parse_profile_yaml
from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.ids import new_ulid
from cleveragents_tui.domain.profile import AutomationProfile
from cleveragents_tui.engine.setup.actions import load_action
from cleveragents_tui.resources import data_path
from cleveragents_tui.sandbox.filesystem_copy import FilesystemCopySandbox, FilesystemCopyStrategy
from cleveragents_tui.sandbox.objectstore.objects import ObjectStore
from cleveragents_tui.sandbox.overlay import EntryKind, OverlayStrategy
from tests.reliability.harness import record_figures
from tests.sandbox.test_filesystem_copy import Canary, Row, file_row, fs_resource, plant
from tests.sandbox.test_overlay import overlay_resource, sandbox_plan

SOAK = os.environ.get("HYPOTHESIS_PROFILE") == "soak"


def fuzz(examples: int) -> settings:
    return settings(
        max_examples=examples * (20 if SOAK else 1),
        derandomize=not SOAK,
        database=None,
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.filter_too_much,
            HealthCheck.data_too_large,
        ],
    )


TALLY: Counter[str] = Counter()


def attempt(target: str, call: Callable[[], Any]) -> Any:
    """Run ``call``: a result, or a one-line ``UserError`` (returned); anything else fails."""
    TALLY[f"{target}: tried"] += 1
    try:
        result = call()
    except UserError as exc:
        message = str(exc)
        assert message.strip(), f"{target}: an empty message"
        assert "\n" not in message, f"{target}: not one line: {message!r}"
        TALLY[f"{target}: refused"] += 1
        return exc
    TALLY[f"{target}: accepted"] += 1
    return result


def teardown_module() -> None:
    targets = sorted({key.split(":")[0] for key in TALLY})
    record_figures(
        "hostile_input",
        inputs_tried=sum(v for k, v in TALLY.items() if k.endswith(": tried")),
        per_target={
            t: {k: TALLY[f"{t}: {k}"] for k in ("tried", "accepted", "refused")} for t in targets
        },
        violations=0,
    )


@contextlib.contextmanager
def fresh() -> Iterator[Path]:
    """A folder of its own for one hypothesis example (tmp_path is one per test)."""
    path = Path(tempfile.mkdtemp(prefix="agents-hostile-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# --- action files ------------------------------------------------------------------------------

YAML_TOKENS = [
    "name: a/b\n", "prompt: p\n", "decisions:\n", "  - key: k\n", "    type: strategy_choice\n",
    "    question: q\n", "    alternatives:\n", "      - option: o\n", "    parent: k\n",
    "    depends_on: [k]\n", "    when: {k: o}\n", "resources: [a/b]\n", "subactions:\n",
    "tool_calls:\n", "- tool: local/write-file\n", "arguments: {resource: a/b}\n",
    "&a ", "*a ", "!!python/object/apply:os.system ['true'] ", "!!binary aGk= ", "!!set ",
    "? ", ": ", "- ", "[", "]", "{", "}", ",", "'", '"', "|\n", ">-\n", "#", "---\n",
    "...\n", "\t", "  ", "\n", "~", "null", "true", "1e999", ".nan", "0x1F", "2024-13-45",
    "9" * 5000, "\x00", "\ufeff", "é", "e\u0301", "\u202e", "%YAML 1.1\n", "!<tag:x> ",
]  # fmt: skip

ACTION_KEYS = [*Action.model_fields, "key", "type", "question", "alternatives", "option"]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["a/b", "local/write-file", "strategy_choice", "k", "o", "", "x" * 300]),
)
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.one_of(st.sampled_from(ACTION_KEYS), st.text(max_size=8)), inner, max_size=5
        ),
    ),
    max_leaves=25,
)


def valid_action() -> dict[str, Any]:
    """The demo's action file, as a document (its placeholders filled)."""
    text = data_path("assets", "demo", "add-greeting.action.yaml").read_text("utf-8")
    document: dict[str, Any] = yaml.safe_load(
        text.replace("@NS@", "demo-abc").replace("@PYTHON@", "python3")
    )
    return document


@st.composite
def mutated(draw: st.DrawFn, document: Any, depth: int = 0) -> Any:
    """``document`` with one thing changed somewhere: a value replaced, a key dropped or
    added, a list item removed or repeated."""
    if depth > 8 or not isinstance(document, dict | list) or draw(st.integers(0, 3)) == 0:
        return draw(documents)
    if isinstance(document, dict):
        if not document:
            return {draw(st.sampled_from(ACTION_KEYS)): draw(documents)}
        key = draw(st.sampled_from(sorted(document, key=str)))
        action = draw(st.sampled_from(["descend", "descend", "drop", "add"]))
        copy = dict(document)
        if action == "drop":
            del copy[key]
        elif action == "add":
            copy[draw(st.sampled_from([*ACTION_KEYS, "unknown"]))] = draw(documents)
        else:
            copy[key] = draw(mutated(document[key], depth + 1))
        return copy
    if not document:
        return [draw(documents)]
    index = draw(st.integers(0, len(document) - 1))
    action = draw(st.sampled_from(["descend", "descend", "drop", "repeat"]))
    items = list(document)
    if action == "drop":
        del items[index]
    elif action == "repeat":
        items.insert(index, items[index])
    else:
        items[index] = draw(mutated(document[index], depth + 1))
    return items


def _load_action_file(folder: Path, content: bytes) -> Any:
    path = folder / "action.yaml"
    path.write_bytes(content)
    result = attempt("action file", lambda: load_action(str(path)))
    if isinstance(result, Action):  # a correct result: it survives its own round trip
        assert Action.model_validate(result.model_dump(mode="json")) == result
    return result


@fuzz(100)
@given(content=st.binary(max_size=400))
def test_action_files_of_random_bytes(content: bytes) -> None:
    with fresh() as scratch:
        _load_action_file(scratch, content)


@fuzz(150)
@given(tokens=st.lists(st.sampled_from(YAML_TOKENS), max_size=30))
def test_action_files_of_random_yaml(tokens: list[str]) -> None:
    with fresh() as scratch:
        _load_action_file(scratch, "".join(tokens).encode("utf-8", "surrogatepass"))


@fuzz(100)
@given(document=documents)
def test_action_files_of_random_documents(document: Any) -> None:
    with fresh() as scratch:
        _load_action_file(scratch, yaml.safe_dump(document, allow_unicode=True).encode())


@fuzz(60)
@given(data=st.data())
def test_mutated_action_files(data: st.DataObject) -> None:
    with fresh() as scratch:
        document = data.draw(mutated(valid_action()))
        _load_action_file(scratch, yaml.safe_dump(document, allow_unicode=True).encode())


def test_the_valid_action_is_accepted(tmp_path: Path) -> None:
    """The mutations start from an action the parser accepts (so they test something)."""
    assert isinstance(_load_action_file(tmp_path, yaml.safe_dump(valid_action()).encode()), Action)


# --- automation profiles ------------------------------------------------------------------------

BUILTIN_PROFILES = sorted(data_path("profiles").glob("*.yaml"))


def _load_profile_file(folder: Path, content: bytes) -> Any:
    path = folder / "profile.yaml"
    path.write_bytes(content)
    result = attempt("profile file", lambda: load_profile_file(path))
    if isinstance(result, AutomationProfile):
        assert AutomationProfile.model_validate(result.model_dump(mode="json")) == result
    return result


@fuzz(100)
@given(content=st.binary(max_size=400))
def test_profile_files_of_random_bytes(content: bytes) -> None:
    with fresh() as scratch:
        _load_profile_file(scratch, content)


@fuzz(100)
@given(
    tokens=st.lists(st.sampled_from([*YAML_TOKENS, "edit_code: 0.5\n", "safety:\n"]), max_size=30)
)
def test_profile_files_of_random_yaml(tokens: list[str]) -> None:
    with fresh() as scratch:
        _load_profile_file(scratch, "".join(tokens).encode("utf-8", "surrogatepass"))


@fuzz(80)
@given(data=st.data())
def test_mutated_profile_files(data: st.DataObject) -> None:
    with fresh() as scratch:
        source = data.draw(st.sampled_from(BUILTIN_PROFILES))
        document = yaml.safe_load(source.read_text("utf-8"))
        if data.draw(st.booleans()):
            document["name"] = "local/fuzzed"  # a custom profile, as users write them
        _load_profile_file(scratch, yaml.safe_dump(data.draw(mutated(document))).encode())


# --- parser corpus -----------------------------------------------------------------------------


def _bomb(levels: int) -> str:
    """A YAML alias bomb inside a tool call's arguments (a field that takes any value)."""
    anchors = "l0: &x0 [1,2,3,4,5,6,7,8,9], " + ", ".join(
        f"l{i}: &x{i} [" + ",".join([f"*x{i - 1}"] * 9) + "]" for i in range(1, levels + 1)
    )
    return (
        "name: a/b\nprompt: p\ndecisions:\n  - key: k\n    type: implementation_choice\n"
        "    question: q\n    alternatives:\n      - option: o\n        tool_calls:\n"
        f"          - tool: local/write-file\n            arguments: {{resource: a/b, {anchors}}}\n"
    )


MINIMAL_ACTION = "name: a/b\nprompt: p\n"
PARSER_CORPUS: dict[str, tuple[bytes, str]] = {
    # name: (file content, "accepted" | "refused")
    "alias bomb (9^8 items from 600 bytes)": (_bomb(8).encode(), "refused"),
    "one alias": (b"name: &n a/b\nprompt: *n\n", "refused"),
    "deep nesting": (b"name: " + b"[" * 3000 + b"]" * 3000 + b"\n", "refused"),
    "deep mappings": (
        b"name: a/b\nprompt: p\nlimits: " + b"{a: " * 3000 + b"1" + b"}" * 3000,
        "refused",
    ),
    "python tag writing a canary": (
        b"name: !!python/object/apply:os.system ['touch CANARY']\n",
        "refused",
    ),
    "python name tag": (b"name: !!python/name:os.system\nprompt: p\n", "refused"),
    "huge integer": (
        MINIMAL_ACTION.encode() + b"limits: {max_cost_usd: 1" + b"0" * 5000 + b"}\n",
        "refused",
    ),
    "impossible date": (MINIMAL_ACTION.encode() + b"description: 2024-13-45\n", "refused"),
    "NUL byte": (b"name: a/b\x00\nprompt: p\n", "refused"),
    "BOM": (b"\xef\xbb\xbf" + MINIMAL_ACTION.encode(), "accepted"),
    "UTF-16": (MINIMAL_ACTION.encode("utf-16"), "refused"),
    "not UTF-8": (b"name: a/b\nprompt: \xff\xfe\n", "refused"),
    "tab indentation": (b"name: a/b\nprompt:\n\t- p\n", "refused"),
    "two documents": (MINIMAL_ACTION.encode() + b"---\nname: c/d\n", "refused"),
    "a set": (b"!!set {name: a/b}\n", "refused"),
    "binary value (bytes read as text)": (b"name: a/b\nprompt: !!binary aGVsbG8=\n", "accepted"),
    "right-to-left override in a name": ("name: a/b\u202e\nprompt: p\n".encode(), "refused"),
    "empty": (b"", "refused"),
    "a list": (b"- name: a/b\n", "refused"),
    "minimal": (MINIMAL_ACTION.encode(), "accepted"),
}


@pytest.mark.parametrize("case", sorted(PARSER_CORPUS))
def test_parser_corpus_action_files(
    tmp_path: Path, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    content, expected = PARSER_CORPUS[case]
    monkeypatch.chdir(tmp_path)  # where `touch CANARY` would land
    result = _load_action_file(tmp_path, content)
    assert ("accepted" if isinstance(result, Action) else "refused") == expected, result
    assert not (tmp_path / "CANARY").exists()


@pytest.mark.parametrize("case", sorted(PARSER_CORPUS))
def test_parser_corpus_profile_files(
    tmp_path: Path, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    content, _ = PARSER_CORPUS[case]
    monkeypatch.chdir(tmp_path)
    assert isinstance(_load_profile_file(tmp_path, content), UserError)  # none is a profile
    assert not (tmp_path / "CANARY").exists()


def test_profile_text_corpus() -> None:
    """parse_profile_yaml is also called on text that never was a file."""
    for content, _ in PARSER_CORPUS.values():
        text = content.decode("utf-8", "replace")
        refused = attempt("profile text", partial(parse_profile_yaml, text, "p.yaml"))
        assert isinstance(refused, UserError)


def _paths(tmp_path: Path) -> dict[str, str]:
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(loop)
    (tmp_path / "folder.yaml").mkdir()
    return {
        "NUL in the path": "a\x00b.yaml",
        "component too long": str(tmp_path / ("x" * 300)),
        "path too long": "/".join(["y" * 200] * 30),
        "unknown user's home": "~no-such-user-here/x.yaml",
        "a FIFO (would block a reader)": str(fifo),
        "a symlink loop": str(loop),
        "a folder": str(tmp_path / "folder.yaml"),
        "a device": "/dev/zero",
        "nothing there": str(tmp_path / "missing.yaml"),
    }


def test_impossible_paths_are_refused_with_one_line(tmp_path: Path) -> None:
    for name, path in _paths(tmp_path).items():
        for target, load in (("action path", load_action), ("profile path", load_profile_file)):
            result = attempt(target, partial(load, path))
            assert isinstance(result, UserError), (name, target, result)


def test_an_action_key_with_a_newline_is_reported_on_one_line(tmp_path: Path) -> None:
    content = (
        b"name: a/b\nprompt: p\ndecisions:\n  - key: k\n    type: strategy_choice\n"
        b'    question: q\n    when: {"a\\nb": x}\n    alternatives: [{option: o}]\n'
    )
    (tmp_path / "a.yaml").write_bytes(content)
    with pytest.raises(UserError) as caught:
        load_action(str(tmp_path / "a.yaml"))
    assert "\n" not in str(caught.value)


# --- filesystem_copy: hostile checkpoint trees ------------------------------------------------------

NASTY_NAMES = [
    "a", "b", "etc", "x", "hard", "pipe", "sub", "..", ".", "", "/", "a/b", "\\", "..\\x",
    "\x00", "a\x00", ".git", ".GIT", ".Git", "~", "~root", "-rf", " ", "\n", "\u00e9",
    "e\u0301", "README", "readme", "x" * 255, "x" * 256, "\udcff", "\ud800", "con", "a:b",
    "\u202e", "\ufeff", "*", "?", "$HOME",
]  # fmt: skip
LINK_TARGETS = [
    "a", "sub", "sub/x", ".", "./", "..", "../..", "../x", "/etc", "/", "a/../..", "sub/../..",
    "", "\x00", "x" * 5000, "a//b", "./sub/..", "...", "\\..\\..",
]  # fmt: skip
names = st.one_of(st.sampled_from(NASTY_NAMES), st.text(min_size=1, max_size=10))
kinds = st.sampled_from(["f", "f", "f", "d", "d", "l", "l", "c", "b", "p", "s", "", "F", 0, None])
modes = st.one_of(
    st.sampled_from([0o644, 0o755, 0o600, 0o777, 0, 0o4755, 0o20644, -1, 2**63, "644", 1.5, True]),
    st.integers(0, 0o777),
)


@st.composite
def hostile_trees(draw: st.DrawFn) -> list[list[Row]]:
    """One to three tree objects (the last is the root): rows of random names, kinds, modes,
    sizes and references; ``@n`` refers to an earlier tree, ``=text`` to a blob."""
    trees: list[list[Row]] = []
    for index in range(draw(st.integers(1, 3))):
        rows: list[Row] = []
        for _ in range(draw(st.integers(0, 4))):
            kind = draw(kinds)
            content = draw(st.text(max_size=12))
            if kind == "d" and index and draw(st.integers(0, 4)):
                ref: object = f"@{draw(st.integers(0, index - 1))}"
            elif kind == "l":
                ref = draw(st.sampled_from(LINK_TARGETS))
            elif draw(st.integers(0, 5)):
                ref = "=" + content
            else:
                ref = draw(st.sampled_from(["", "0" * 64, "g" * 64, 7, None, "=" + "y" * 9]))
            size = len(content.encode()) if draw(st.integers(0, 5)) else draw(st.integers(-2, 99))
            row: Row = [draw(names), kind, draw(modes), size, 0, 0, 0, ref]
            if not draw(st.integers(0, 30)):
                row = row[: draw(st.integers(1, 7))]  # malformed
            rows.append(row)
        trees.append(rows)
    return trees


def _traps(root: Path, canary: Canary) -> None:
    """What a tool (or someone) might have left in a folder: a hard link to a canary,
    symlinks to the canaries and a FIFO."""
    os.link(canary.root / "etc" / "passwd", root / "hard")
    os.symlink(canary.root / "etc", root / "etc")
    os.symlink(canary.root / "x", root / "x")
    os.mkfifo(root / "pipe")


def _world(folder: Path) -> tuple[FilesystemCopySandbox, Path, Canary]:
    real = folder / "real"
    real.mkdir()
    (real / "seed.txt").write_text("seed\n")
    canary = Canary(folder / "outside")
    sandbox = FilesystemCopyStrategy(durable=False).create(
        fs_resource(real), new_ulid(), folder / "sb"
    )
    _traps(sandbox.workdir, canary)
    return sandbox, real, canary


def _restore_and_apply(sandbox: FilesystemCopySandbox, real: Path, canary: Canary, ref: str) -> str:
    """Roll back to the planted checkpoint, then land it on ``real``: a correct result at each
    step or a clean refusal, and the canaries untouched either way."""
    restored = attempt("archive restore", lambda: sandbox.rollback(ref))
    assert canary.unchanged(), "a restore changed a file outside the sandbox"
    attempt("archive verify", lambda: sandbox.verify(ref))
    if isinstance(restored, UserError):
        return "refused"
    rescanned = sandbox.checkpoint()  # the folder now is exactly the planted tree
    assert sandbox.diff(ref, rescanned) == []
    _traps(real, canary)  # someone else's: a hard link, links out, a FIFO
    applied = attempt("archive apply", sandbox.apply)
    assert canary.unchanged(), "an apply changed a file outside the real folder"
    if not isinstance(applied, UserError):  # the plan's files, and the foreign ones kept
        foreign = {"hard", "etc", "x", "pipe"}
        landed = {k: v for k, v in _content(real).items() if k not in foreign}
        assert landed == {k: v for k, v in _content(sandbox.workdir).items() if k not in foreign}
        assert all(os.path.lexists(real / name) for name in foreign)
    return "accepted"


def _content(root: Path) -> dict[str, tuple[object, ...]]:
    """Kind, mode and bytes (or link target) of everything under ``root``, never opening a
    FIFO or a device; no times (apply writes new ones)."""
    state: dict[str, tuple[object, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                value: tuple[object, ...] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                value = ("dir", mode)
            elif stat.S_ISREG(st.st_mode):
                value = ("file", mode, path.read_bytes())
            else:
                value = ("special", stat.S_IFMT(st.st_mode))
            state[path.relative_to(root).as_posix()] = value
    return state


@fuzz(100)
@given(trees=hostile_trees())
def test_hostile_checkpoint_trees(trees: list[list[Row]]) -> None:
    with fresh() as scratch:
        sandbox, real, canary = _world(scratch)
        before = _content(sandbox.workdir)
        ref = plant(sandbox, trees)
        outcome = _restore_and_apply(sandbox, real, canary, ref)
        if outcome == "refused":
            assert _content(sandbox.workdir) == before, "refused after changing work/"


def test_a_link_row_with_a_mode_is_refused_or_restored_as_recorded(tmp_path: Path) -> None:
    sandbox, _, _ = _world(tmp_path)
    ref = plant(sandbox, [[["a", "l", 0o644, 1, 0, 0, 0, "b"]]])
    if isinstance(attempt("archive restore", lambda: sandbox.rollback(ref)), UserError):
        return
    assert sandbox.diff(ref, sandbox.checkpoint()) == []


def _dirs(*names: str, leaf: list[Row]) -> list[list[Row]]:
    """``leaf`` nested in folders ``names`` (outermost first)."""
    trees = [leaf]
    for name in reversed(names):
        trees.append([[name, "d", 0o755, 0, 0, 0, 0, f"@{len(trees) - 1}"]])
    return trees


def _link(name: str, target: str) -> Row:
    return [name, "l", 0o777, len(target), 0, 0, 0, target]


TRAVERSAL_CORPUS: dict[str, tuple[list[list[Row]], str]] = {
    # name: (trees, "accepted" | "refused"); the folders hold _traps() in every case
    "windows parent ..\\..\\etc": ([[file_row("..\\..\\etc", "x")]], "refused"),
    "windows drive C:\\x": ([[file_row("C:\\x", "x")]], "refused"),
    "overlong name (256 bytes)": ([[file_row("x" * 256, "x")]], "refused"),
    "overlong name deep in the tree": (_dirs("sub", leaf=[file_row("é" * 128, "x")]), "refused"),
    "longest name (255 bytes)": ([[file_row("x" * 255, "x")]], "accepted"),
    "unencodable name (lone surrogate)": ([[file_row("a\ud800", "x")]], "refused"),
    "undecodable byte name (surrogateescape)": ([[file_row("a\udcff", "x")]], "accepted"),
    "unicode NFC/NFD twins": (
        [
            [
                file_row(unicodedata.normalize("NFC", "é"), "nfc"),
                file_row(unicodedata.normalize("NFD", "é"), "nfd"),
            ]
        ],
        "accepted",
    ),
    "case twins": ([[file_row("README", "upper"), file_row("readme", "lower")]], "accepted"),
    ".GIT at the top (a folder, on a case-sensitive disk)": ([[file_row(".GIT", "x")]], "accepted"),
    ".git/config at the top": (_dirs(".git", leaf=[file_row("config", "x")]), "refused"),
    "nested .git hooks (content of a nested repository)": (
        _dirs("sub", ".git", "hooks", leaf=[file_row("post-checkout", "#!/bin/sh\n", 0o755)]),
        "accepted",
    ),
    "newline in a name": ([[file_row("a\nb", "x")]], "accepted"),
    "name over the trapped link etc": (
        _dirs("etc", leaf=[file_row("passwd", "owned\n")]),
        "accepted",
    ),
    "file over the trapped link x": ([[file_row("x", "owned\n")]], "accepted"),
    "file over the hard link to a canary": ([[file_row("hard", "owned\n")]], "accepted"),
    "file over the FIFO": ([[file_row("pipe", "x")]], "accepted"),
    "link then a folder under the same name": (
        [[file_row("f", "x")], [_link("a", "sub"), ["a", "d", 0o755, 0, 0, 0, 0, "@0"]]],
        "refused",
    ),
    "link into a link's parent": (_dirs("sub", leaf=[_link("up", "../..")]), "refused"),
    "link to itself": ([[_link("a", "a")]], "accepted"),
    "link chain climbing out": (
        _dirs("sub", leaf=[_link("a", "b"), _link("b", "../../x")]),
        "refused",
    ),
    "link with a NUL": ([[_link("a", "sub\x00/x")]], "refused"),
    "link too long": ([[_link("a", "x" * 4097)]], "refused"),
    "size larger than the blob": ([[["a", "f", 0o644, 99, 0, 0, 0, "=abc"]]], "refused"),
    "size smaller than the blob": ([[["a", "f", 0o644, 1, 0, 0, 0, "=abc"]]], "refused"),
    "blob that is not stored": ([[["a", "f", 0o644, 1, 0, 0, 0, "0" * 64]]], "refused"),
    "a folder whose tree is a blob": ([[["a", "d", 0o755, 0, 0, 0, 0, "=not a tree"]]], "refused"),
    "socket kind": ([[["s", "s", 0o644, 0, 0, 0, 0, "=x"]]], "refused"),
    "block device kind": ([[["b", "b", 0o644, 0, 0, 0, 0, "=x"]]], "refused"),
    "setuid file": ([[file_row("x", "x", mode=0o4755)]], "refused"),
    "nested 300 deep": (_dirs(*["d"] * 300, leaf=[file_row("f", "x")]), "refused"),
    "read-only folder with files": (
        [[file_row("f", "x")], [["ro", "d", 0o555, 0, 0, 0, 0, "@0"]]],
        "accepted",
    ),
}


SIZE_CASES = ("size larger than the blob", "size smaller than the blob")


@pytest.mark.parametrize("case", sorted(TRAVERSAL_CORPUS))
def test_traversal_corpus_filesystem_copy(tmp_path: Path, case: str) -> None:
    trees, expected = TRAVERSAL_CORPUS[case]
    sandbox, real, canary = _world(tmp_path)
    before = _content(sandbox.workdir)
    outcome = _restore_and_apply(sandbox, real, canary, plant(sandbox, trees))
    assert outcome == expected
    if outcome == "refused":
        # planned and checked before the first change: nothing changed
        assert _content(sandbox.workdir) == before


@pytest.mark.parametrize("case", SIZE_CASES)
def test_a_lying_size_is_refused_before_anything_changes(tmp_path: Path, case: str) -> None:
    sandbox, _, _ = _world(tmp_path)
    before = _content(sandbox.workdir)
    with pytest.raises(UserError):
        sandbox.rollback(plant(sandbox, TRAVERSAL_CORPUS[case][0]))
    assert _content(sandbox.workdir) == before


def test_a_device_file_in_the_way_is_replaced_not_written(tmp_path: Path) -> None:
    sandbox, real, canary = _world(tmp_path)
    try:
        os.mknod(sandbox.workdir / "null", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("this process may not make device files")
    outcome = _restore_and_apply(sandbox, real, canary, plant(sandbox, [[file_row("null", "x")]]))
    assert outcome == "accepted" and (real / "null").read_text() == "x"


def test_a_socket_in_the_way_is_removed(tmp_path: Path) -> None:
    sandbox, real, canary = _world(tmp_path)
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(sandbox.workdir / "sock"))
    except OSError:
        pytest.skip("no Unix socket here (path too long)")
    finally:
        server.close()
    assert (
        _restore_and_apply(sandbox, real, canary, plant(sandbox, [[file_row("f", "x")]]))
        == "accepted"
    )
    assert not (sandbox.workdir / "sock").exists()


NOTE_CORPUS: dict[str, object] = {
    "root is not an object id": {
        "v": 1,
        "checkpoint": "900000-0badc0de",
        "root": "../../x",
        "stamp": 0,
    },
    "stamp is text": {"v": 1, "checkpoint": "900000-0badc0de", "root": "0" * 64, "stamp": "now"},
    "reference with a path": {
        "v": 1,
        "checkpoint": "../900000-0badc0de",
        "root": "0" * 64,
        "stamp": 0,
    },
    "not an object": ["900000-0badc0de"],
    "unknown version": {"v": 99, "checkpoint": "900000-0badc0de", "root": "0" * 64, "stamp": 0},
}


@pytest.mark.parametrize("case", sorted(NOTE_CORPUS))
def test_hostile_checkpoint_notes(tmp_path: Path, case: str) -> None:
    """The record naming a checkpoint's root, damaged: refused, or not listed at all."""
    sandbox, _, canary = _world(tmp_path)
    before = _content(sandbox.workdir)
    store = ObjectStore(sandbox.workdir.parent / "objects", durable=False)
    with store.batch():
        store.add_note(json.dumps(NOTE_CORPUS[case]).encode())
    for ref in ("900000-0badc0de", "../900000-0badc0de"):
        assert isinstance(attempt("checkpoint note", partial(sandbox.rollback, ref)), UserError)
    attempt("checkpoint note", sandbox.checkpoints)
    assert _content(sandbox.workdir) == before
    assert canary.unchanged()


# --- overlay: hostile layer records -------------------------------------------------------------

SANE_NAMES = ["a", "b", "sub", "seed.txt", "etc", "x", "hard", "pipe", "docs", "passwd"]


@st.composite
def layer_records(draw: st.DrawFn, store: ObjectStore) -> list[object]:
    """Layer records, mostly well formed (so that some open, and apply), with nasty names,
    kinds, modes, sizes, references and link targets mixed in."""
    rows: list[object] = [["d", "sub", 0o755, 0, "", False]]
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.integers(0, 3)):  # a sane record, under the top or under sub/
            kind = draw(st.sampled_from(["f", "f", "d", "l", "w"]))
            path = draw(st.sampled_from(["", "sub/"])) + draw(st.sampled_from(SANE_NAMES))
            content = draw(st.binary(max_size=8))
            ref: object = {
                "f": store.put_bytes(content),
                "l": draw(st.sampled_from(["b", "sub", "."])),
            }.get(kind, "")
            mode = {"l": 0o777, "d": 0o755}.get(kind, 0o644)
            rows.append([kind, path, mode, len(content) if kind == "f" else 0, ref, kind == "d"])
            continue
        odd: object = draw(st.sampled_from(["f", "d", "l", "w", "c", "p", "", 1, None]))
        path = "/".join(draw(st.lists(names, min_size=1, max_size=3)))
        if not draw(st.integers(0, 3)):
            path = draw(st.sampled_from(["../x", "/etc/x", "a//b", "a/", ".git/x", "./a", "a/./b"]))
        ref = draw(st.sampled_from([*LINK_TARGETS, "", "0" * 64, store.put_bytes(b"x"), 0, None]))
        row = [
            odd,
            path,
            draw(modes),
            draw(st.integers(-1, 9)),
            ref,
            draw(st.sampled_from([False, True, 0, None])),
        ]
        rows.append(row if draw(st.integers(0, 20)) else row[: draw(st.integers(0, 5))])
    return rows


@fuzz(80)
@given(data=st.data())
def test_hostile_overlay_layers(data: st.DataObject) -> None:
    with fresh() as scratch:
        real = scratch / "real"
        real.mkdir()
        (real / "seed.txt").write_text("seed\n")
        canary = Canary(scratch / "outside")
        _traps(real, canary)
        before = _content(real)
        sandbox = OverlayStrategy(durable=False).create(
            overlay_resource(real), new_ulid(), scratch / "sb"
        )
        ref = sandbox.checkpoint()
        store = ObjectStore(sandbox.home / "objects", durable=False)
        rows = data.draw(layer_records(store))
        layer = store.put_bytes(json.dumps({"v": 1, "e": rows}).encode())
        (sandbox.home / "layers" / ref / "sealed").write_text(json.dumps({"v": 1, "layer": layer}))
        attempt("overlay layer", lambda: sandbox.verify(ref))
        opened = attempt(
            "overlay layer",
            lambda: OverlayStrategy(durable=False).open(
                sandbox.resource, sandbox_plan(sandbox), sandbox.home
            ),
        )
        assert _content(real) == before and canary.unchanged()
        if not isinstance(opened, UserError):
            applied = attempt("overlay apply", opened.apply)
            assert canary.unchanged(), "an overlay apply changed a file outside the real folder"
            if not isinstance(applied, UserError):  # the real folder is the merged view now
                assert _view(opened) == {
                    k: v for k, v in _content(real).items() if v[0] != "special"
                }


def _view(sandbox: Any) -> dict[str, tuple[object, ...]]:
    """The overlay's merged view in the terms of :func:`_content`."""
    view: dict[str, tuple[object, ...]] = {}
    for entry in sandbox.walk():
        if entry.kind is EntryKind.FILE:
            view[entry.path] = ("file", entry.mode, sandbox.read_bytes(entry.path))
        elif entry.kind is EntryKind.DIRECTORY:
            view[entry.path] = ("dir", entry.mode)
        elif entry.kind is EntryKind.SYMLINK:
            view[entry.path] = ("link", sandbox.read_link(entry.path))
    return view


@pytest.mark.parametrize("line", [b"garbage\n", b'["f","\xff",420,1,"",false]\n'])
def test_a_damaged_overlay_log_line_is_refused(tmp_path: Path, line: bytes) -> None:
    real = tmp_path / "real"
    real.mkdir()
    sandbox = OverlayStrategy(durable=False).create(
        overlay_resource(real), new_ulid(), tmp_path / "sb"
    )
    sandbox.write_bytes("a", b"a")
    top = sorted((sandbox.home / "layers").iterdir())[-1]
    with open(top / "log", "ab") as log:
        log.write(line)
    result = attempt(
        "overlay log",
        lambda: OverlayStrategy(durable=False).open(
            sandbox.resource, sandbox_plan(sandbox), sandbox.home
        ),
    )
    assert isinstance(result, UserError)


@pytest.mark.parametrize("thing", ["fifo", "outside link"])
def test_apply_next_to_a_fifo_or_an_outside_link(tmp_path: Path, thing: str) -> None:
    """Someone puts a FIFO or a link to elsewhere in the real folder, away from every path the
    plan changes: Apply lands the plan's changes (or refuses before writing anything)."""
    sandbox, real, canary = _world(tmp_path)
    for trap in ("hard", "etc", "x", "pipe"):  # the sandbox's own are another test's subject
        (sandbox.workdir / trap).unlink()
    (sandbox.workdir / "new.txt").write_text("new\n")
    if thing == "fifo":
        os.mkfifo(real / "pipe")
    else:
        os.symlink(canary.root / "etc", real / "etc")
    result = attempt("archive apply", sandbox.apply)
    assert canary.unchanged()
    landed = (real / "new.txt").exists()
    assert not isinstance(result, UserError) or not landed, "refused after writing"
    assert not isinstance(result, UserError)
