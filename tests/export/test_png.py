"""PNG export of a decision tree: the layout function, the image, and the CLI."""

from __future__ import annotations

import json
import random
import struct
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cleveragents_tui.cli import cli
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.views import PlanTree, TreeLine, TreeRow
from cleveragents_tui.engine.demo.demo_data import load_sample_plan
from cleveragents_tui.engine.read import browse
from cleveragents_tui.engine.read.browse import layout_tree
from cleveragents_tui.export.png import (
    LABEL_LIMIT,
    MAX_SIDE_PX,
    TreeLayout,
    escape_text,
    image_size,
    layout_positions,
    render_tree_png,
)
from cleveragents_tui.store.store import Store

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def row(n: int, parent: int | None, **kw: object) -> TreeRow:
    fields: dict[str, object] = {
        "decision_id": f"d{n}",
        "parent_decision_id": None if parent is None else f"d{parent}",
        "sequence_number": n,
        "decision_type": "strategy_choice",
        "phase": "strategize",
        "chosen_option": f"option {n}",
        "confidence_score": 0.5,
        "is_correction": False,
        "corrects_decision_id": None,
        "superseded_by": None,
    }
    fields.update(kw)
    return TreeRow(**fields)  # type: ignore[arg-type]


def lines_of(parents: list[int | None]) -> list[TreeLine]:
    """Tree lines (pre-order, as plan_tree returns them) for decision i with parent parents[i]."""
    return layout_tree([row(i, p) for i, p in enumerate(parents)])


def plan_tree_of(lines: list[TreeLine], **kw: object) -> PlanTree:
    plan = Plan(action="local/test", title="A test plan")
    return PlanTree(plan, True, lines, 0, **kw)  # type: ignore[arg-type]


def check_layout(lines: list[TreeLine], layout: TreeLayout) -> None:
    """Every node placed; parents centred over their children; no two nodes closer than 1."""
    n = len(lines)
    assert len(layout.xs) == len(layout.depths) == len(layout.parents) == n
    children: dict[int, list[int]] = {}
    for i, p in enumerate(layout.parents):
        assert layout.depths[i] == lines[i].depth
        if p is not None:
            assert layout.depths[i] == layout.depths[p] + 1
            assert lines[p].row.decision_id == lines[i].row.parent_decision_id
            children.setdefault(p, []).append(i)
    for p, kids in children.items():
        xs = [layout.xs[k] for k in kids]
        assert xs == sorted(xs)  # siblings left to right in display order
        assert layout.xs[p] == pytest.approx((xs[0] + xs[-1]) / 2)
    by_level: dict[int, list[float]] = {}
    for x, d in zip(layout.xs, layout.depths, strict=True):
        assert 0 <= x <= layout.slots - 1
        by_level.setdefault(d, []).append(x)
    for xs in by_level.values():
        xs.sort()
        assert all(b - a >= 1 - 1e-9 for a, b in pairwise(xs))
    assert layout.levels == (max(layout.depths) + 1 if n else 0)


# --- layout ---------------------------------------------------------------------------------


def test_layout_of_nothing() -> None:
    layout = layout_positions([])
    assert (layout.xs, layout.slots, layout.levels) == ([], 0, 0)


def test_layout_single_node_and_small_trees() -> None:
    assert layout_positions(lines_of([None])).xs == [0.0]
    # root with three leaves: leaves at 0, 1, 2, root over the middle one
    lines = lines_of([None, 0, 0, 0])
    layout = layout_positions(lines)
    assert layout.xs == [1.0, 0.0, 1.0, 2.0]
    assert layout.slots == 3 and layout.levels == 2
    check_layout(lines, layout)
    # uneven: 0 -> (1 -> (3, 4, 5), 2); 1 is centred over 3..5, 0 over 1 and 2
    lines = lines_of([None, 0, 0, 1, 1, 1])
    layout = layout_positions(lines)
    pos = {line.row.decision_id: x for line, x in zip(lines, layout.xs, strict=True)}
    assert pos == {"d3": 0.0, "d4": 1.0, "d5": 2.0, "d1": 1.0, "d2": 3.0, "d0": 2.0}
    check_layout(lines, layout)


def test_layout_of_a_forest_keeps_trees_apart() -> None:
    # the child of a hidden superseded decision starts a tree of its own
    lines = layout_tree([row(0, None), row(1, 0), row(2, 9), row(3, 2)])
    layout = layout_positions(lines)
    assert [line.depth for line in lines] == [0, 1, 0, 1]
    assert layout.parents == [None, 0, None, 2]
    check_layout(lines, layout)


def test_layout_of_a_5000_deep_chain() -> None:
    lines = lines_of([None, *range(4999)])
    layout = layout_positions(lines)
    assert layout.levels == 5000 and layout.slots == 1
    assert set(layout.xs) == {0.0}
    check_layout(lines, layout)


def test_layout_of_a_10000_node_random_tree() -> None:
    rnd = random.Random(7)
    parents: list[int | None] = [None, *(rnd.randrange(i) for i in range(1, 10_000))]
    lines = lines_of(parents)
    layout = layout_positions(lines)
    assert len(layout.xs) == 10_000
    check_layout(lines, layout)


# --- rendering ------------------------------------------------------------------------------


@pytest.fixture
def sample_tree(sqlite_store: Store) -> PlanTree:
    plan_id = load_sample_plan(sqlite_store)
    return browse.plan_tree(sqlite_store, plan_id, show_superseded=True)


def test_sample_plan_renders_to_png_of_the_automatic_size(
    sample_tree: PlanTree, tmp_path: Path
) -> None:
    out = tmp_path / "tree.png"
    size = render_tree_png(sample_tree, out)
    assert png_size(out) == size == image_size(layout_positions(sample_tree.lines))


def test_explicit_size_is_honoured(sample_tree: PlanTree, tmp_path: Path) -> None:
    out = tmp_path / "tree.png"
    assert render_tree_png(sample_tree, out, width_px=1234, height_px=567) == (1234, 567)
    assert png_size(out) == (1234, 567)
    assert render_tree_png(sample_tree, out, width_px=900, dpi=150)[0] == 900
    assert png_size(out)[0] == 900


def test_rendering_is_deterministic(sample_tree: PlanTree, tmp_path: Path) -> None:
    a, b = tmp_path / "a.png", tmp_path / "b.png"
    render_tree_png(sample_tree, a)
    render_tree_png(sample_tree, b)
    assert a.read_bytes() == b.read_bytes()


def test_text_with_dollars_checkpoints_and_all_marks_renders(tmp_path: Path) -> None:
    rows = [
        row(0, None, chosen_option="Spend $5 and $10 on $\\alpha$ tokens", phase="strategize"),
        row(1, 0, phase="execute", superseded_by="d2", chosen_option="old $x$"),
        row(2, 0, phase="execute", is_correction=True, corrects_decision_id="d1"),
        row(3, 2, phase="apply", confidence_score=None, chosen_option="x" * 500),
        row(4, 2, phase="unknown-phase", chosen_option=""),
    ]
    tree = plan_tree_of(layout_tree(rows), has_checkpoints=frozenset({"d2", "d3"}))
    out = tmp_path / "marks.png"
    assert render_tree_png(tree, out) == png_size(out)


def test_escape_text() -> None:
    assert escape_text("costs $5 or $6") == r"costs \$5 or \$6"


def test_empty_tree_renders(tmp_path: Path) -> None:
    out = tmp_path / "empty.png"
    size = render_tree_png(plan_tree_of([]), out)
    assert png_size(out) == size


def test_large_trees_render_within_bounds(tmp_path: Path) -> None:
    rnd = random.Random(3)
    parents: list[int | None] = [None]
    parents += [rnd.randrange(max(0, i - 50), i) for i in range(1, 10_000)]
    tree = plan_tree_of(lines_of(parents))
    assert len(tree.lines) > LABEL_LIMIT
    out = tmp_path / "big.png"
    width, height = render_tree_png(tree, out)
    assert png_size(out) == (width, height)
    assert width <= MAX_SIDE_PX and height <= MAX_SIDE_PX
    chain = plan_tree_of(lines_of([None, *range(4999)]))
    out = tmp_path / "chain.png"
    assert render_tree_png(chain, out) == png_size(out)
    assert png_size(out)[1] == MAX_SIDE_PX


def test_out_of_range_size_is_refused(sample_tree: PlanTree, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="out of range"):
        render_tree_png(sample_tree, tmp_path / "x.png", width_px=50)
    assert not (tmp_path / "x.png").exists()


# --- CLI ------------------------------------------------------------------------------------


@pytest.fixture
def run(tmp_path: Path) -> Callable[..., Result]:
    """Invoke ``agents --db <tmp file> ARGS`` in-process (as tests/cli/conftest.py does)."""
    db = str(tmp_path / "agents.db")

    def invoke(*args: str) -> Result:
        return CliRunner().invoke(cli, ["--db", db, *args], catch_exceptions=False)

    return invoke


Run = Callable[..., Result]


@pytest.fixture
def sample(run: Run) -> dict[str, str]:
    assert run("demo-data").exit_code == 0
    plans = json.loads(run("plan", "list", "--format=json").stdout)["plans"]
    return {"plan": next(p for p in plans if p["parent_plan_id"] is None)["plan_id"]}


def test_cli_png_writes_the_file_and_prints_the_path(
    run: Run, sample: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "f.png"
    result = run("plan", "tree", sample["plan"], "--format=png", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert str(out) in result.output
    assert out.read_bytes()[:8] == PNG_SIGNATURE


def test_cli_png_without_output_is_refused_in_one_line(
    run: Run, sample: dict[str, str], tmp_path: Path
) -> None:
    result = run("plan", "tree", sample["plan"], "--format=png")
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "-o" in result.stderr
    assert result.stdout == ""


def test_cli_refuses_to_overwrite_without_force(
    run: Run, sample: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "f.png"
    out.write_bytes(b"precious")
    result = run("plan", "tree", sample["plan"], "--format=png", "-o", str(out))
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "--force" in result.stderr
    assert out.read_bytes() == b"precious"
    result = run("plan", "tree", sample["plan"], "--format=png", "-o", str(out), "--force")
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == PNG_SIGNATURE


def test_cli_missing_folder_is_a_clear_error(
    run: Run, sample: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "no" / "such" / "f.png"
    result = run("plan", "tree", sample["plan"], "--format=png", "-o", str(out))
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "does not exist" in result.stderr
    assert not out.parent.exists()


def test_cli_json_output_file_matches_stdout(
    run: Run, sample: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "f.json"
    args = ("plan", "tree", sample["plan"], "--show-superseded", "--format=json")
    stdout = run(*args).stdout
    result = run(*args, "-o", str(out))
    assert result.exit_code == 0, result.output
    assert str(out) in result.output
    assert out.read_text("utf-8") == stdout
    assert json.loads(out.read_text("utf-8"))["format"] == "cleveragents.plan-tree/1"


def test_cli_global_json_format_with_output_writes_json(
    run: Run, sample: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "g.json"
    result = run("--format=json", "plan", "tree", sample["plan"], "-o", str(out))
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text("utf-8"))["format"] == "cleveragents.plan-tree/1"


def test_a_box_keeps_its_confidence_and_its_edges_meet_the_boxes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between boxes, a line runs from the parent's bottom to the child's top: drawn centre
    to centre, a line to a far child ran behind its sibling's box and read as that box's
    edge. A long type is cut, never the confidence (`implementation_choice 0.…`)."""
    from matplotlib.collections import LineCollection
    from matplotlib.figure import Figure

    drawn: list[Figure] = []
    save = Figure.savefig

    def savefig(fig: Figure, *args: Any, **kwargs: Any) -> None:
        drawn.append(fig)
        save(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)
    rows = [
        row(0, None),
        *(row(n, 0, decision_type="implementation_choice" * 2) for n in (1, 2, 3)),
    ]
    render_tree_png(plan_tree_of(layout_tree(rows)), tmp_path / "t.png")
    [ax] = drawn[0].axes
    heads = [t.get_text().split("\n")[0] for t in ax.texts if "implementation" in t.get_text()]
    assert len(heads) == 3 and all(h.endswith("… 0.50") for h in heads), heads
    [edges] = [c for c in ax.collections if isinstance(c, LineCollection)]
    segments = edges.get_segments()
    assert len(segments) == 3
    for (_, parent_end), (_, child_end) in segments:  # the root's level is 0, its children's -1
        assert 0 > parent_end > child_end > -1, (parent_end, child_end)
