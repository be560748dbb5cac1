"""The ``none`` strategy: changes go straight to the resource; nothing can be rolled back."""

from __future__ import annotations

from pathlib import Path

import pytest

from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.base import (
    CheckpointMissingError,
    Sandbox,
    SandboxError,
    SandboxStrategy,
)
from cleveragents_tui.sandbox.none import NoneSandbox, NoneStrategy

PLAN = "01J0000000000000000000PLAN"


def _resource(location: str) -> Resource:
    return Resource(
        resource_id="local/external-api",
        kind="external",
        location=location,
        sandbox_strategy=SandboxStrategyName.NONE,
    )


@pytest.fixture
def sandbox(tmp_path: Path) -> NoneSandbox:
    return NoneStrategy().create(_resource("https://api.example.com/v1"), PLAN, tmp_path / "root")


def test_matches_the_protocols(sandbox: NoneSandbox, tmp_path: Path) -> None:
    strategy: SandboxStrategy = NoneStrategy()
    assert strategy.name is SandboxStrategyName.NONE
    assert isinstance(sandbox, Sandbox)
    assert not (tmp_path / "root").exists()  # nothing is stored


def test_workdir_is_the_location_only_when_it_is_a_directory(tmp_path: Path) -> None:
    folder = tmp_path / "site"
    folder.mkdir()
    (tmp_path / "file.txt").write_text("x")
    strategy = NoneStrategy()
    assert strategy.create(_resource(str(folder)), PLAN, tmp_path).workdir == folder
    assert strategy.create(_resource(str(tmp_path / "file.txt")), PLAN, tmp_path).workdir is None
    assert strategy.create(_resource("https://x.test/"), PLAN, tmp_path).workdir is None


def test_checkpoints_are_markers_that_stay_valid_after_reopening(
    sandbox: NoneSandbox, tmp_path: Path
) -> None:
    first, second = sandbox.checkpoint(), sandbox.checkpoint()
    assert first.startswith("none:")
    assert first != second
    sandbox.verify(first)
    reopened = NoneStrategy().open(sandbox.resource, PLAN, tmp_path / "root")
    reopened.verify(second)
    reopened.drop_checkpoint(first)
    reopened.verify(first)  # markers hold nothing, so dropping one loses nothing


@pytest.mark.parametrize("ref", ["sp_0123456789abcdef", "none:", "none:not-a-ulid", "x; rm -rf /"])
def test_anything_but_a_marker_is_not_a_checkpoint(sandbox: NoneSandbox, ref: str) -> None:
    with pytest.raises(CheckpointMissingError, match="none:<ULID>"):
        sandbox.verify(ref)
    with pytest.raises(CheckpointMissingError):
        sandbox.rollback(ref)


def test_rollback_is_refused_and_suggests_append_mode(sandbox: NoneSandbox) -> None:
    ref = sandbox.checkpoint()
    with pytest.raises(SandboxError) as raised:
        sandbox.rollback(ref)
    assert not isinstance(raised.value, CheckpointMissingError)
    message = str(raised.value)
    assert "local/external-api cannot be rolled back (sandbox strategy: none)" in message
    assert "--mode=append" in message


def test_what_changed_is_not_claimed(sandbox: NoneSandbox) -> None:
    ref = sandbox.checkpoint()
    for action in (
        lambda: sandbox.diff(ref, ref),
        lambda: sandbox.read(ref, "a.txt"),
        sandbox.changes_since_baseline,
    ):
        with pytest.raises(SandboxError, match="not recorded"):
            action()


def test_apply_and_discard_are_honest_no_ops(sandbox: NoneSandbox) -> None:
    result = sandbox.apply()
    assert result.changes == ()
    assert "went straight to the real resource" in result.summary
    sandbox.discard()
    sandbox.discard()
