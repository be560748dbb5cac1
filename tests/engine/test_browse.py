"""Tree layout: display order, sibling order, and no recursion limit on deep chains."""

from __future__ import annotations

from cleveragents_tui.domain.views import TreeRow
from cleveragents_tui.engine.read.browse import layout_tree


def row(i: int, parent: int | None, superseded: bool = False) -> TreeRow:
    return TreeRow(
        f"D{i:025d}",
        None if parent is None else f"D{parent:025d}",
        i,
        "strategy_choice",
        "strategize",
        f"option {i}",
        None,
        False,
        None,
        "X" if superseded else None,
    )


def test_children_follow_their_parent_in_sequence_order() -> None:
    rows = [row(0, None), row(1, 0), row(2, 1), row(3, 0), row(4, 1)]
    lines = layout_tree(rows)
    assert [line.row.sequence_number for line in lines] == [0, 1, 2, 4, 3]
    assert [line.depth for line in lines] == [0, 1, 2, 2, 1]
    assert [line.is_last for line in lines] == [True, False, False, True, True]


def test_a_chain_deeper_than_the_recursion_limit_lays_out() -> None:
    rows = [row(0, None)] + [row(i, i - 1) for i in range(1, 20_000)]
    lines = layout_tree(rows)
    assert len(lines) == 20_000
    assert lines[-1].depth == 19_999


def test_rows_whose_parent_is_hidden_start_their_own_tree() -> None:
    rows = [row(0, None), row(2, 1)]  # decision 1 is not among the rows
    assert [line.depth for line in layout_tree(rows)] == [0, 0]
