"""Every `agents config set …` that a message, a docstring or a doc tells people to run is
accepted by the real CLI, and every `sandbox.checkpoint.*` setting mentioned is one
`config set` knows. (They once named settings `config set` refused as unknown.)"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import cleveragents_tui
from cleveragents_tui.cli import cli
from cleveragents_tui.engine.setup.config import KNOWN_SETTINGS

PACKAGE = Path(cleveragents_tui.__file__).parent
ROOT = PACKAGE.parent
HINT = re.compile(
    r"agents config set (?P<key>\S+) (?P<value>\S+)(?: --(?P<scope>project|resource) (?P<where>\S+))?"
)
MENTION = re.compile(r"sandbox\.checkpoint\.[a-z][a-z-]*[a-z]")
PLACEHOLDER = re.compile(r"[{<]|^[A-Z_:]+$")
# A value for each setting whose hint shows a placeholder (P, N, PROVIDER:MODEL, {…}).
SAMPLES = {
    "core.automation-profile": "cautious",
    "core.reasoner": "scripted",
    "core.model": "openai:gpt-4o-mini",
    "core.model-base-url": "http://127.0.0.1:9/v1",
    "core.model-timeout": "300",
    "sandbox.checkpoint.enabled": "false",
    "sandbox.checkpoint.max-per-plan": "40",
    "gc.retention_days": "14",
}


def _constant(module: str, name: str) -> str | None:
    value = getattr(importlib.import_module(module), name, None)
    return value if isinstance(value, str) else None


def _strings(path: Path) -> list[str]:
    """Every string literal of a module, f-strings with module-level names filled in and
    other fields left as ``{…}``."""
    module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    found = []
    tree = ast.parse(path.read_text("utf-8"))
    pieces = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in pieces
        ):
            found.append(node.value)
        elif isinstance(node, ast.JoinedStr):
            parts = []
            for value in node.values:
                if isinstance(value, ast.Constant):
                    parts.append(str(value.value))
                else:
                    inner = value.value if isinstance(value, ast.FormattedValue) else None
                    name = inner.id if isinstance(inner, ast.Name) else None
                    parts.append((name and _constant(module, name)) or "{…}")
            found.append("".join(parts))
    return found


def texts() -> list[tuple[str, str]]:
    """(where, text) of every message and docstring of the package and every doc."""
    found = [
        (str(path.relative_to(ROOT)), text)
        for path in sorted(PACKAGE.rglob("*.py"))
        if "migrations" not in path.parts
        for text in _strings(path)
    ]
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return found + [(str(p.relative_to(ROOT)), p.read_text("utf-8")) for p in docs]


def _clean(word: str) -> str:
    return word.rstrip("`'\".,;:)")


def hints() -> list[tuple[str, str, str, str | None, str | None]]:
    found = []
    for where, text in texts():
        for match in HINT.finditer(" ".join(text.split())):
            key, value = _clean(match["key"]), _clean(match["value"])
            scope = match["scope"]
            found.append((where, key, value, scope, _clean(match["where"] or "") or None))
    return found


def test_the_grep_finds_the_hints_people_are_given() -> None:
    keys = {key for _, key, _, _, _ in hints()}
    assert {
        "core.automation-profile",
        "sandbox.checkpoint.enabled",
        "sandbox.checkpoint.max-per-plan",
    } <= keys


@pytest.mark.parametrize(
    ("where", "key", "value", "scope", "target"),
    [h for h in hints() if not PLACEHOLDER.search(h[1])],  # {key}: repeats the key typed
    ids=lambda item: item if isinstance(item, str) else "",
)
def test_each_config_set_hint_is_accepted(
    where: str, key: str, value: str, scope: str | None, target: str | None, tmp_path: Path
) -> None:
    db = str(tmp_path / "agents.db")
    args = ["config", "set", key]
    if PLACEHOLDER.search(value):
        value = SAMPLES.get(key) or ("0.15" if key.startswith("prices.") else value)
    args.append(value)
    if scope == "project":
        args += ["--project", "local/app" if not target or PLACEHOLDER.search(target) else target]
    elif scope == "resource":
        folder = tmp_path / "folder"
        folder.mkdir()
        added = CliRunner().invoke(
            cli,
            ["--db", db, "resource", "add", "r", "--kind", "filesystem", "--location", str(folder)],
        )
        assert added.exit_code == 0, added.output
        args += ["--resource", "local/r"]
    result = CliRunner().invoke(cli, ["--db", db, *args])
    assert result.exit_code == 0, f"{where}: agents {' '.join(args)}: {result.output}"


def test_every_checkpoint_setting_mentioned_is_a_known_setting() -> None:
    mentioned = {(m, where) for where, text in texts() for m in MENTION.findall(text)}
    unknown = sorted((name, where) for name, where in mentioned if name not in KNOWN_SETTINGS)
    assert not unknown
    assert {"sandbox.checkpoint.enabled", "sandbox.checkpoint.max-per-plan"} <= {
        name for name, _ in mentioned
    }


def test_config_help_names_every_setting() -> None:
    """`agents config --help` lists the settings from its own text (it imports no engine):
    each one `config set` knows is there. It once lacked three."""
    shown = CliRunner().invoke(cli, ["config", "--help"]).output
    assert [key for key in KNOWN_SETTINGS if key not in shown] == []
