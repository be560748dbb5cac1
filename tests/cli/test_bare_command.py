"""`agents` or `agents plan` with no command prints its help and exits 0: help asked for by
leaving the command out is not a usage error (click ≥ 8.2 exits 2 there by default)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from cleveragents_tui.cli import cli


@pytest.mark.parametrize(
    ("args", "listed"),
    [([], "  plan "), (["plan"], "  tree "), (["automation-profile"], "  list ")],
)
def test_a_bare_group_prints_its_help_and_exits_0(args: list[str], listed: str) -> None:
    result = CliRunner().invoke(cli, args)

    assert result.exit_code == 0, result.output
    assert result.output.startswith("Usage: ")
    assert listed in result.output


def test_an_unknown_or_incomplete_command_is_still_a_usage_error() -> None:
    unknown = CliRunner().invoke(cli, ["nosuch"])
    incomplete = CliRunner().invoke(cli, ["plan", "tree"])

    assert unknown.exit_code == 2
    assert "No such command 'nosuch'" in unknown.output
    assert incomplete.exit_code == 2
    assert "Missing argument 'PLAN'" in incomplete.output
