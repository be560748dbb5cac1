"""Repository details that other code relies on."""

from __future__ import annotations

from dataclasses import fields

from cleveragents_tui.domain.views import TreeRow
from cleveragents_tui.store.repositories.decisions import TREE_COLUMNS


def test_tree_columns_are_selected_in_tree_row_field_order() -> None:
    # TreeRow is built positionally from these columns (it is the hot path of `plan tree`).
    assert [c.key for c in TREE_COLUMNS] == [f.name for f in fields(TreeRow)]
