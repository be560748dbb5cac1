"""The layer rule of DESIGN.md section 2 (import-linter) and ruff stay clean."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: install the dev extra (pip install -e '.[dev]')")
    return found


def test_import_linter_contracts_hold() -> None:
    result = subprocess.run(
        [_tool("lint-imports")], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_is_clean() -> None:
    result = subprocess.run(
        [_tool("ruff"), "check", "cleveragents_tui", "tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_vulture_finds_no_code_that_nothing_uses() -> None:
    """Settings in pyproject.toml ([tool.vulture]); exceptions, each with its reason, in
    vulture_whitelist.py."""
    result = subprocess.run(
        [_tool("vulture")], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
