"""An export saved in ``agents serve --export-dir`` is written inside that folder whatever
is planted at its name after the dialog checked it: real symbolic links pointing outside."""

from __future__ import annotations

from pathlib import Path

import pytest

from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.tui.web_exports import EXPORT_DIR_ENV, save_in_folder, web_target


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    exports = tmp_path / "exports"
    exports.mkdir()
    monkeypatch.setenv(EXPORT_DIR_ENV, str(exports))
    return exports


def test_a_link_to_an_existing_file_outside_is_refused_not_followed(
    folder: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "settings.json"
    outside.write_text("keep")
    (folder / "tree.json").symlink_to(outside)
    with pytest.raises(UserError, match="is a link"):
        save_in_folder("tree.json", b"{}", replace=True)  # "Replace" was confirmed
    assert outside.read_text() == "keep"
    assert sorted(p.name for p in folder.iterdir()) == ["tree.json"]  # no partial file left


def test_a_dangling_link_does_not_create_its_target(folder: Path, tmp_path: Path) -> None:
    outside = tmp_path / "authorized_keys"
    (folder / "tree.json").symlink_to(outside)
    with pytest.raises(UserError, match="is a link"):
        save_in_folder("tree.json", b"{}", replace=False)
    assert not outside.exists()


def test_a_file_made_meanwhile_is_kept_unless_replacing(folder: Path) -> None:
    (folder / "tree.json").write_text("theirs")
    with pytest.raises(UserError, match="meanwhile"):
        save_in_folder("tree.json", b"ours", replace=False)
    assert (folder / "tree.json").read_text() == "theirs"
    assert save_in_folder("tree.json", b"ours", replace=True) == folder.resolve() / "tree.json"
    assert (folder / "tree.json").read_bytes() == b"ours"


@pytest.mark.parametrize(
    "name",
    ["/tmp/tree.json", "~/settings.json", "../settings.json", "sub/tree.json", "..", ".x.json", ""],
)
def test_a_name_that_is_not_a_plain_file_name_is_refused(folder: Path, name: str) -> None:
    """(The browser tests send one or two of these through a real tab.)"""
    with pytest.raises(UserError, match="not a plain file name"):
        web_target(name)
    with pytest.raises(UserError, match="not a plain file name"):
        save_in_folder(name, b"{}", replace=True)
    assert list(folder.iterdir()) == []


def test_without_an_export_folder_a_plain_name_is_a_download(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(EXPORT_DIR_ENV, raising=False)
    assert web_target("tree.json") is None
    with pytest.raises(UserError, match="not a plain file name"):
        web_target("/tmp/tree.json")
