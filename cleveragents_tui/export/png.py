"""The decision tree as a PNG image (``agents plan tree PLAN --format=png -o FILE``).

The layout is ours (networkx has no tree layout without Graphviz): leaves are spaced one
slot apart in display order, every parent is centred over its first and last child, and
depth grows downwards. Drawing uses networkx and matplotlib on the Agg canvas, imported only
when an image is actually rendered, so the read-only CLI stays fast to start.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cleveragents_tui.domain.views import PlanTree, TreeLine, TreeRow

if TYPE_CHECKING:
    from matplotlib.axes import Axes

#: Past this many decisions only nodes and edges are drawn (the title says so).
LABEL_LIMIT = 300
#: Automatic image size: pixels per leaf slot and per tree level, and the bounds.
SLOT_PX = 200
LEVEL_PX = 100
MIN_WIDTH_PX = 960
MIN_HEIGHT_PX = 420
MAX_SIDE_PX = 4800  # a side, when only nodes and edges are drawn
MAX_LABELLED_SIDE_PX = 12_000
MAX_LABELLED_PIXELS = 30_000_000
#: Bands above (title) and below (legend) the tree, in pixels.
TITLE_PX = 64
LEGEND_PX = 36
MARGIN_PX = 16
#: Below these the labelled boxes would be unreadable: draw nodes only.
MIN_LABEL_SLOT_PX = 120
MIN_LABEL_LEVEL_PX = 70

PHASE_COLOURS: dict[str, tuple[str, str]] = {  # phase: (edge/marker colour, box fill)
    "strategize": ("#3465a4", "#dbe5f3"),
    "execute": ("#ce5c00", "#fbe3cc"),
    "apply": ("#4e9a06", "#ddf0d0"),
}
OTHER_PHASE = ("#555753", "#eeeeec")
CORRECTION_COLOUR = "#cc0000"
CHECKPOINT_COLOUR = "#75507b"
SUPERSEDED_FADE = 0.65  # share of white blended into a superseded decision's colours
CORRECTION_MARK = "↻ "
SUPERSEDED_MARK = "✗ "


@dataclass(frozen=True)
class TreeLayout:
    """Positions of ``lines`` (same order): ``xs[i]`` in leaf slots, ``depths[i]`` in levels."""

    xs: list[float]
    depths: list[int]
    parents: list[int | None]
    slots: int
    levels: int


def layout_positions(lines: Sequence[TreeLine]) -> TreeLayout:
    """Lay out a pre-order list of tree lines (as ``PlanTree.lines``) without recursion.

    Leaves get consecutive integer slots in display order; a parent sits at the midpoint of
    its first and last child, so it is centred over its children and stays within its own
    subtree's span: two nodes on the same level are always at least one slot apart.
    A line at depth 0 (or deeper than its predecessor allows) starts a tree of its own.
    """
    n = len(lines)
    parents: list[int | None] = [None] * n
    depths = [0] * n
    first_child: list[int | None] = [None] * n
    last_child: list[int | None] = [None] * n
    path: list[int] = []  # path[d] is the index of the current ancestor at depth d
    for i, line in enumerate(lines):
        depth = min(max(line.depth, 0), len(path))
        del path[depth:]
        parent = path[-1] if path else None
        parents[i] = parent
        depths[i] = depth
        if parent is not None:
            if first_child[parent] is None:
                first_child[parent] = i
            last_child[parent] = i
        path.append(i)
    xs = [0.0] * n
    slot = 0
    for i in range(n):  # pre-order meets the leaves left to right
        if first_child[i] is None:
            xs[i] = float(slot)
            slot += 1
    for i in range(n - 1, -1, -1):  # children come after their parent in pre-order
        first, last = first_child[i], last_child[i]
        if first is not None and last is not None:
            xs[i] = (xs[first] + xs[last]) / 2
    return TreeLayout(xs, depths, parents, slot, (max(depths) + 1) if n else 0)


def image_size(layout: TreeLayout) -> tuple[int, int]:
    """The automatic image size in pixels for ``layout``.

    A tree small enough to label gets ``SLOT_PX`` per leaf and ``LEVEL_PX`` per level
    (squeezed down to the readable minimum if needed) up to ``MAX_LABELLED_SIDE_PX`` a side
    and ``MAX_LABELLED_PIXELS`` in all; any other tree is drawn as dots within
    ``MAX_SIDE_PX`` a side.
    """
    slots, levels = max(layout.slots, 1), max(layout.levels, 1)
    extra_w, extra_h = 2 * MARGIN_PX, TITLE_PX + LEGEND_PX + 2 * MARGIN_PX
    if len(layout.xs) <= LABEL_LIMIT:
        width = min(max(extra_w + slots * SLOT_PX, MIN_WIDTH_PX), MAX_LABELLED_SIDE_PX)
        height = min(max(extra_h + levels * LEVEL_PX, MIN_HEIGHT_PX), MAX_LABELLED_SIDE_PX)
        readable = (width - extra_w) / slots >= MIN_LABEL_SLOT_PX and (
            height - extra_h
        ) / levels >= MIN_LABEL_LEVEL_PX
        if readable and width * height <= MAX_LABELLED_PIXELS:
            return width, height
    return (
        min(max(extra_w + slots * SLOT_PX, MIN_WIDTH_PX), MAX_SIDE_PX),
        min(max(extra_h + levels * LEVEL_PX, MIN_HEIGHT_PX), MAX_SIDE_PX),
    )


def escape_text(text: str) -> str:
    """Plain text for matplotlib: ``$`` would otherwise start mathtext."""
    return text.replace("$", r"\$")


def render_tree_png(
    tree: PlanTree,
    path: Path,
    *,
    width_px: int | None = None,
    height_px: int | None = None,
    dpi: int = 100,
) -> tuple[int, int]:
    """Draw ``tree`` into the PNG file ``path``; returns the image size ``(width, height)``.

    Without ``width_px``/``height_px`` the size follows the tree (see :func:`image_size`).
    Boxes show the decision type and the start of the chosen option, coloured by phase;
    corrections have a red border and ↻, superseded decisions are faded with ✗, and a
    purple diamond marks a decision with a checkpoint group. Past ``LABEL_LIMIT`` decisions,
    or when the boxes would be too small to read, only nodes and edges are drawn.
    """
    import matplotlib

    if "matplotlib.pyplot" not in sys.modules:
        matplotlib.use("Agg")  # never a display; networkx imports pyplot when drawing
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    layout = layout_positions(tree.lines)
    auto_w, auto_h = image_size(layout)
    width = width_px or auto_w
    height = height_px or auto_h
    if width < 200 or height < 200 or width > 4 * MAX_SIDE_PX or height > 4 * MAX_SIDE_PX:
        raise ValueError(f"image size {width}x{height} px is out of range")

    fig = Figure(figsize=(width / dpi, height / dpi), dpi=dpi)
    FigureCanvasAgg(fig)
    fig.patch.set_facecolor("white")
    tree_h = height - TITLE_PX - LEGEND_PX
    ax = fig.add_axes((0.0, LEGEND_PX / height, 1.0, tree_h / height))
    ax.set_axis_off()

    n = len(tree.lines)
    plot_w = width - 2 * MARGIN_PX
    plot_h = tree_h - 2 * MARGIN_PX
    slot_px = plot_w / max(layout.slots, 1)
    level_px = plot_h / max(layout.levels, 1)
    too_many = n > LABEL_LIMIT
    too_small = slot_px < MIN_LABEL_SLOT_PX or level_px < MIN_LABEL_LEVEL_PX
    labelled = n > 0 and not too_many and not too_small

    # Data coordinates: one unit per slot and per level, margins converted from pixels.
    margin_x = MARGIN_PX / slot_px
    margin_y = MARGIN_PX / level_px
    ax.set_xlim(-0.5 - margin_x, max(layout.slots, 1) - 0.5 + margin_x)
    ax.set_ylim(-(max(layout.levels, 1) - 0.5) - margin_y, 0.5 + margin_y)

    if n:
        _draw_edges(ax, layout, slot_px, level_px, _box_height(level_px) / 2 if labelled else 0)
        if labelled:
            _draw_boxes(ax, tree, layout, slot_px, level_px, dpi)
        else:
            _draw_dots(ax, tree, layout, slot_px, level_px, dpi)
        ax.set_xlim(-0.5 - margin_x, max(layout.slots, 1) - 0.5 + margin_x)
        ax.set_ylim(-(max(layout.levels, 1) - 0.5) - margin_y, 0.5 + margin_y)
    else:
        ax.text(
            0.5,
            0.5,
            "(no decisions recorded yet)",
            ha="center",
            va="center",
            transform=ax.transAxes,
            fontsize=11,
            color="#555753",
        )

    note = ""
    if n and not labelled:
        why = f"more than {LABEL_LIMIT} decisions" if too_many else "too many to fit"
        note = f" · labels omitted ({why}; see --format=json)"
    _draw_title(fig, tree, n, note, height)
    _draw_legend(fig, labelled, dpi)
    fig.savefig(path, format="png", dpi=dpi, facecolor="white")
    return width, height


def _title_line(tree: PlanTree) -> str:
    plan = tree.plan
    return plan.title or plan.action


def _draw_title(fig: Any, tree: PlanTree, n: int, note: str, height: int) -> None:
    plan = tree.plan
    facts = [
        f"plan {plan.plan_id}",
        plan.action,
        f"{plan.phase} · {plan.state}",
        f"attempt {plan.attempt}",
        f"{n} decision{'s' if n != 1 else ''}",
    ]
    if tree.hidden_superseded:
        facts.append(f"{tree.hidden_superseded} superseded hidden")
    top = 1 - 10 / height
    fig.text(
        0.5,
        top,
        escape_text(_shorten(_title_line(tree), 120)),
        ha="center",
        va="top",
        fontsize=14,
        fontweight="bold",
        color="#2e3436",
    )
    fig.text(
        0.5,
        top - 28 / height,
        escape_text(" · ".join(facts) + note),
        ha="center",
        va="top",
        fontsize=9,
        color="#555753",
    )


def _draw_legend(fig: Any, labelled: bool, dpi: int) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list[Any] = [
        Patch(facecolor=fill, edgecolor=edge, label=phase)
        for phase, (edge, fill) in PHASE_COLOURS.items()
    ]
    handles += [
        Patch(
            facecolor="white",
            edgecolor=CORRECTION_COLOUR,
            linewidth=2,
            label=CORRECTION_MARK + "correction",
        ),
        Patch(
            facecolor=_fade(OTHER_PHASE[1], SUPERSEDED_FADE),
            edgecolor=_fade(OTHER_PHASE[0], SUPERSEDED_FADE),
            linestyle="--",
            label=SUPERSEDED_MARK + "superseded",
        ),
        Line2D(
            [],
            [],
            marker="D",
            linestyle="none",
            color=CHECKPOINT_COLOUR,
            markersize=6,
            label="checkpoint",
        ),
    ]
    fig.legend(
        handles=handles,
        loc="lower center",
        ncol=len(handles),
        fontsize=8,
        frameon=False,
        bbox_to_anchor=(0.5, 0.0),
        handlelength=1.6,
        columnspacing=1.4,
    )


def _phase(row: TreeRow) -> tuple[str, str]:
    return PHASE_COLOURS.get(row.phase, OTHER_PHASE)


def _draw_edges(
    ax: Axes, layout: TreeLayout, slot_px: float, level_px: float, half_height: float = 0.0
) -> None:
    """A line from each parent to each child; with boxes (``half_height`` of a level), from
    the parent's bottom to the child's top, so that a line to a far child never runs behind
    a sibling's box and reads as its edge."""
    from matplotlib.collections import LineCollection

    segments = [
        ((layout.xs[parent], -layout.depths[parent] - half_height),
         (layout.xs[i], -layout.depths[i] + half_height))
        for i, parent in enumerate(layout.parents)
        if parent is not None
    ]  # fmt: skip
    if not segments:
        return
    width = min(1.2, max(0.2, min(slot_px, level_px) / 40))
    ax.add_collection(
        LineCollection(segments, linewidths=width, colors="#888a85", alpha=0.9, zorder=1)
    )


def _box_height(level_px: float) -> float:
    """Of a level: three lines of text and some padding."""
    return min(0.62, 58 / level_px)


def _draw_dots(
    ax: Axes, tree: PlanTree, layout: TreeLayout, slot_px: float, level_px: float, dpi: int
) -> None:
    import networkx as nx

    diameter_pt = min(10.0, max(1.5, 0.6 * min(slot_px, level_px) * 72 / dpi))
    size = diameter_pt**2
    groups: dict[tuple[str, str], list[int]] = {}
    for i, line in enumerate(tree.lines):
        row = line.row
        fade = SUPERSEDED_FADE if row.superseded_by else 0.0
        edge = CORRECTION_COLOUR if row.is_correction else _phase(row)[0]
        groups.setdefault((_fade(_phase(row)[0], fade), _fade(edge, fade)), []).append(i)
    graph: Any = nx.Graph()
    graph.add_nodes_from(range(len(tree.lines)))
    pos = {i: (layout.xs[i], -float(layout.depths[i])) for i in range(len(tree.lines))}
    for (colour, edge), nodes in groups.items():
        nx.draw_networkx_nodes(
            graph,
            pos,
            nodelist=nodes,
            ax=ax,
            node_size=size,
            node_color=colour,
            edgecolors=edge,
            linewidths=min(1.5, diameter_pt / 5),
        )
    marked = [
        i for i, line in enumerate(tree.lines) if line.row.decision_id in tree.has_checkpoints
    ]
    if marked:
        ax.scatter(
            [layout.xs[i] for i in marked],
            [-float(layout.depths[i]) for i in marked],
            s=size / 3,
            marker="D",
            c=CHECKPOINT_COLOUR,
            zorder=4,
        )


def _draw_boxes(
    ax: Axes, tree: PlanTree, layout: TreeLayout, slot_px: float, level_px: float, dpi: int
) -> None:
    from matplotlib.patches import FancyBboxPatch

    box_w = 0.9  # of a slot: neighbours are at least one slot apart, so boxes never touch
    box_h = _box_height(level_px)
    box_h_px = box_h * level_px
    font_pt = min(8.0, max(5.5, box_h_px / 3 / 1.35 * 72 / dpi * 0.85))
    char_px = 0.56 * font_pt * dpi / 72
    chars = max(8, int((box_w * slot_px - 10) / char_px))
    for i, line in enumerate(tree.lines):
        row = line.row
        x, y = layout.xs[i], -float(layout.depths[i])
        edge, fill = _phase(row)
        superseded = row.superseded_by is not None
        fade = SUPERSEDED_FADE if superseded else 0.0
        box = FancyBboxPatch(
            (x - box_w / 2, y - box_h / 2),
            box_w,
            box_h,
            boxstyle="round,pad=0,rounding_size=0.04",
            mutation_aspect=slot_px / level_px,
            facecolor=_fade(fill, fade),
            zorder=3,
            edgecolor=_fade(CORRECTION_COLOUR if row.is_correction else edge, fade),
            linewidth=2.0 if row.is_correction else 1.0,
            linestyle="--" if superseded else "-",
        )
        ax.add_patch(box)
        mark = SUPERSEDED_MARK if superseded else (CORRECTION_MARK if row.is_correction else "")
        # the type is cut, never the confidence (``implementation_choice 0.…`` hid it)
        score = "" if row.confidence_score is None else f" {row.confidence_score:.2f}"
        head = _shorten(mark + row.decision_type, chars - len(score)) + score
        body = textwrap.wrap(
            " ".join(row.chosen_option.split()), chars, max_lines=2, placeholder="…"
        )
        text = "\n".join([head, *body])
        label = ax.text(
            x,
            y,
            escape_text(text),
            ha="center",
            va="center",
            fontsize=font_pt,
            color="#888a85" if superseded else "#2e3436",
            zorder=4,
            linespacing=1.25,
            clip_on=True,
        )
        label.set_clip_path(box)
        if row.decision_id in tree.has_checkpoints:
            ax.plot(
                [x + box_w / 2],
                [y + box_h / 2],
                marker="D",
                markersize=7,
                color=_fade(CHECKPOINT_COLOUR, fade),
                markeredgecolor="white",
                zorder=5,
            )


def _fade(colour: str, amount: float) -> str:
    """``colour`` (``#rrggbb``) blended with ``amount`` of white."""
    if amount <= 0:
        return colour
    rgb = [int(colour[k : k + 2], 16) for k in (1, 3, 5)]
    return "#" + "".join(f"{round(c + (255 - c) * amount):02x}" for c in rgb)


def _shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
