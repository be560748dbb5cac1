"""A plan's Python tests import the plan's files, even when the project is installed in the
environment they run in (actors/command_tools.py, ``PYTHONPATH``), and the progress says
why a call failed, not only its exit status (views/progress.py).

The user's project has a ``src/`` layout and is installed in a virtual environment, as
`pip install -e .` does (a ``.pth`` file naming the checkout's ``src``) or as `pip install .`
does (a copy in site-packages). A plan writes a bug into the module and runs the tests with
that environment's Python. Before, the tests imported the installed code — the checkout's,
which is right — so they passed, and the plan went on to its Apply gate with code no test
had run; the tests must fail on the plan's files, and the person asked must read why.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from cleveragents_tui.cli import cli
from cleveragents_tui.domain.enums import PlanState
from cleveragents_tui.store.store import Store

RIGHT = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a - b\n"
TEST = (
    "import unittest\n\nfrom calc import add\n\n\n"
    "class AddTest(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
)


def _git(folder: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=me", "-c", "user.email=me@example.invalid", *args],
        cwd=folder,
        check=True,
        capture_output=True,
        timeout=60,
    )


def _project(folder: Path) -> Path:
    (folder / "src" / "calc").mkdir(parents=True)
    (folder / "tests").mkdir()
    (folder / "src" / "calc" / "__init__.py").write_text(RIGHT)
    (folder / "tests" / "test_calc.py").write_text(TEST)
    _git(folder, "init", "-q", "-b", "main")
    _git(folder, "add", "-A")
    _git(folder, "commit", "-q", "-m", "calc")
    return folder


def _environment(folder: Path, project: Path, how: str) -> Path:
    """A virtual environment with the project installed ``how``; its Python."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(folder)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    python = folder / "bin" / "python"
    found = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    site = Path(found.stdout.strip())
    if how == "editable":  # what `pip install -e .` writes for a src layout
        (site / "__editable__.calc-0.1.pth").write_text(f"{project / 'src'}\n")
    else:  # `pip install .`: a copy
        shutil.copytree(project / "src" / "calc", site / "calc")
    return python


def _action(tests: list[str]) -> dict[str, Any]:
    """One decision: write the bug into the module, then run ``tests``."""
    write = {
        "tool": "local/write-file",
        "arguments": {"resource": "local/calc", "path": "src/calc/__init__.py", "content": WRONG},
    }
    check = {"tool": "local/run-tests", "arguments": {"resource": "local/calc", "argv": tests}}
    return {
        "name": "local/calc-change",
        "prompt": "Change add",
        "resources": ["local/calc"],
        "tools": ["local/write-file", "local/run-tests"],
        "automation_profile": "trusted",
        "decisions": [
            {
                "key": "write",
                "type": "implementation_choice",
                "question": "What does add do?",
                "alternatives": [
                    {"option": "subtract", "confidence": 0.9, "tool_calls": [write, check]}
                ],
            }
        ],
    }


@pytest.mark.parametrize("how", ["editable", "installed"])
def test_the_tests_run_on_the_plan_files_not_the_installed_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    project = _project(tmp_path / "calc")
    python = _environment(tmp_path / "venv", project, how)
    tests = [str(python), "-m", "unittest", "discover", "-s", "tests"]
    checked = subprocess.run(tests, cwd=project, capture_output=True, timeout=60)
    assert checked.returncode == 0, checked.stderr  # the project's tests pass as it is
    db = str(tmp_path / "agents.db")
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(tmp_path / "sandboxes"))
    runner = CliRunner()
    added = runner.invoke(
        cli, ["--db", db, "resource", "add", "calc", "--kind", "git", "--location", str(project)]
    )
    assert added.exit_code == 0, added.output
    action_file = tmp_path / "calc.action.yaml"
    action_file.write_text(yaml.safe_dump(_action(tests)), encoding="utf-8")

    used = runner.invoke(cli, ["--db", db, "--progress", "plan", "use", str(action_file)])

    assert used.exit_code == 0, used.output
    # what the person watching reads as it happens: the call failed, and why
    assert "    ✗ local/run-tests: exit status 1: FAIL: test_add" in used.stderr
    store = Store.open(db)
    try:
        with store.unit_of_work() as uow:
            [plan] = uow.plans.all()
            [question] = [a.question for a in uow.approvals.pending(plan.plan_id)]
    finally:
        store.close()
    assert plan.state is PlanState.AWAITING_APPROVAL
    assert question.startswith("local/run-tests failed in step write"), question
    assert "last: exit status 1: FAIL: test_add" in question
    assert (project / "src" / "calc" / "__init__.py").read_text() == RIGHT  # the checkout
