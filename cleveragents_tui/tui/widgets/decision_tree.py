"""The decision tree, filled lazily: a node's children are added when it is expanded, in
chunks of :data:`CHUNK` (a "… N more" node loads the next chunk), so a plan of 10,000+
decisions paints its first screen at once (DESIGN.md section 8)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from cleveragents_tui.domain.views import TreeRow
from cleveragents_tui.tui.render import (
    AFFECTED_STYLE,
    TREE_OPTION,
    TREE_OPTION_AT_LEAST,
    tree_label,
)

CHUNK = 200
AUTO_EXPAND_BUDGET = 300  # expand breadth-first on open until this many nodes are shown
MORE = "more:"  # node data of a "… N more" node: MORE + the parent's decision id ("" = top)


@dataclass(frozen=True, repr=False)
class TreeIndex:
    """A plan's tree arranged as the widget shows it: built, and compared with the one
    shown, in the loading thread, so the event loop only adds or relabels nodes (on a
    10,000-decision plan the arranging and comparing took most of a refresh's time)."""

    rows: dict[str, TreeRow]
    kids: dict[str | None, list[TreeRow]]
    checkpoints: frozenset[str]

    def __repr__(self) -> str:
        """Short: a worker's description quotes its arguments (``@work``), and ten thousand
        rows took half a second to print, on the event loop."""
        return f"TreeIndex({len(self.rows)} rows)"

    @classmethod
    def of(cls, rows: list[TreeRow], checkpoints: frozenset[str]) -> TreeIndex:
        """The tree of ``rows``, in sequence order (so is each child list); a row whose
        parent is not among them (the root, the child of a hidden superseded decision)
        starts a tree of its own, as in ``engine.read.browse.layout_tree``."""
        by_id = {row.decision_id: row for row in rows}
        kids: dict[str | None, list[TreeRow]] = defaultdict(list)
        for row in rows:
            parent = row.parent_decision_id
            kids[parent if parent in by_id else None].append(row)
        return cls(by_id, dict(kids), checkpoints)

    def extended(
        self, rows: list[TreeRow], checkpoints: frozenset[str]
    ) -> tuple[TreeIndex, list[str], list[str | None]] | None:
        """This tree with ``rows`` added, each recorded after every row it holds: the new
        tree, the rows held whose checkpoint mark changed, and the decisions (None: the
        top) whose child lists grew, parents first. A copy: the one shown stays as it is
        (only the lists that grow are copied). None when a new row is the missing parent of
        a row shown at the top: the tree must be laid out again."""
        if not rows and checkpoints == self.checkpoints:
            return self, [], []
        orphans = {row.parent_decision_id for row in self.kids.get(None, [])}
        if any(row.decision_id in orphans for row in rows):
            return None
        by_id = dict(self.rows)
        by_id.update((row.decision_id, row) for row in rows)
        kids = dict(self.kids)
        grown: dict[str | None, None] = {}  # in the order first grown: parents first
        for row in rows:  # in sequence order: each appended at the end of its list
            parent = row.parent_decision_id
            key = parent if parent in by_id else None
            if key not in grown:
                grown[key] = None
                kids[key] = list(kids.get(key, ()))
            kids[key].append(row)
        marks = [ident for ident in checkpoints ^ self.checkpoints if ident in self.rows]
        return TreeIndex(by_id, kids, checkpoints), marks, list(grown)

    def changed_since(self, old: TreeIndex | None) -> list[str] | None:
        """The decisions of ``old`` whose row or checkpoint mark differs now, when the tree
        only changed those or grew at the end of child lists (a running plan, an answered
        approval); None when it must be rebuilt (a correction re-parents rows, superseded
        rows shown or hidden)."""
        if old is None or not old.rows:
            return None
        for key, before in old.kids.items():
            now = self.kids.get(key, [])
            if len(now) < len(before) or any(
                a.decision_id != b.decision_id for a, b in zip(before, now, strict=False)
            ):
                return None
        return [
            ident
            for ident, row in self.rows.items()
            if ident in old.rows
            and (
                row != old.rows[ident] or (ident in self.checkpoints) != (ident in old.checkpoints)
            )
        ]


class DecisionTree(Tree[str]):
    """Node data: a decision id, or ``MORE + parent id`` for a "load more" node."""

    DEFAULT_CSS = """
    DecisionTree { scrollbar-gutter: stable; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        self._affected: frozenset[str] = frozenset()  # before Tree's: it draws the root
        super().__init__("decisions", id=id)
        self.show_root = False
        self.guide_depth = 2
        self.index = TreeIndex({}, {}, frozenset())  # what is shown
        self._node_of: dict[str, TreeNode[str]] = {}
        self._loaded: dict[str | None, int] = {}
        self._more: dict[str | None, TreeNode[str]] = {}

    # what is shown, read from ``index`` (one copy of it, replaced whole by each load)

    @property
    def _rows(self) -> dict[str, TreeRow]:
        return self.index.rows

    @property
    def _kids(self) -> dict[str | None, list[TreeRow]]:
        return self.index.kids

    @property
    def _checkpoints(self) -> frozenset[str]:
        return self.index.checkpoints

    # -- loading ----------------------------------------------------------------------------

    def load(
        self,
        index: TreeIndex,
        changed: list[str] | None,
        keep: str | None = None,
        grown: Collection[str | None] | None = None,
    ) -> None:
        """Show ``index``; keep the cursor on decision ``keep`` if it is still there.

        ``changed`` is ``index.changed_since(self.index)``, worked out in the loading
        thread: a list patches the nodes in place (only those rows are relabelled, rows
        appended are added; the cursor, scroll and expanded branches stay), None rebuilds.
        ``grown`` names the child lists rows were appended to, parents first, when the
        loading thread knows (``TreeIndex.extended``); None: every list is compared.
        """
        old, self.index = self.index, index
        if changed is not None:
            self._patch(old, changed, grown)
            return
        self._node_of = {}
        self._loaded = {}
        self._more = {}
        self.clear()
        self._populate(self.root, None)
        self._auto_expand()
        if keep is not None and keep in self._rows:
            self.reveal(keep)
        elif self.root.children:
            self._move_to(self.root.children[0])

    def _patch(
        self, old: TreeIndex, changed: list[str], grown: Collection[str | None] | None
    ) -> None:
        """Relabel the ``changed`` rows and add those appended since ``old``."""
        rows, kids = self._rows, self._kids
        for ident in changed:
            node = self._node_of.get(ident)
            if node is not None:
                node.set_label(self._label(rows[ident]))
        if old is self.index:  # the same tree (a refresh that did not re-read it)
            return
        for key in kids if grown is None else grown:
            new, before = kids.get(key, []), len(old.kids.get(key, ()))
            if len(new) == before:
                continue
            node = self.root if key is None else self._node_of.get(key)
            if node is None:
                continue  # its parent is not shown yet
            if key not in self._loaded:
                if before == 0 and len(self._node_of) < AUTO_EXPAND_BUDGET:
                    self._populate(node, key)  # a leaf until now: open it, as a load would
                    node.expand()
                else:
                    node.allow_expand = True  # collapsed by the user: expanding loads it
                continue
            more = self._more.get(key)
            if more is None:
                self._populate(node, key)  # fully shown: add the new rows
            else:
                more.set_label(self._more_label(len(new) - self._loaded.get(key, 0)))

    def _move_to(self, node: TreeNode[str]) -> None:
        """Textual's move_cursor uses the node's line number, which is stale until the lines
        are rebuilt after nodes were added or expanded: rebuild them first."""
        _ = self._tree_lines
        self.move_cursor(node, animate=False)

    def _auto_expand(self) -> None:
        queue = list(self.root.children)
        shown = len(queue)
        while queue and shown < AUTO_EXPAND_BUDGET:
            node = queue.pop(0)
            if node.data is None or node.data.startswith(MORE) or not node.allow_expand:
                continue
            node.expand()
            self._populate(node, node.data)
            shown += len(node.children)
            queue.extend(node.children)

    def _populate(self, node: TreeNode[str], key: str | None) -> None:
        """Add the next chunk of ``key``'s children under ``node``."""
        kids = self._kids.get(key, [])
        start = self._loaded.get(key, 0)
        if start >= len(kids) and start > 0:
            return
        more = self._more.pop(key, None)
        if more is not None:
            more.remove()
        end = min((start // CHUNK + 1) * CHUNK, len(kids))  # to the next chunk's end: rows
        # added by a refresh (or the rest of a first, partial load) fill the open chunk first
        for row in kids[start:end]:
            has_kids = bool(self._kids.get(row.decision_id))
            child = node.add(
                self._label(row), data=row.decision_id, allow_expand=has_kids, expand=False
            )
            self._node_of[row.decision_id] = child
        self._loaded[key] = end
        if end < len(kids):
            self._more[key] = node.add_leaf(
                self._more_label(len(kids) - end), data=MORE + (key or "")
            )

    @staticmethod
    def _more_label(count: int) -> Text:
        return Text(f"… {count} more (enter to load)", style="italic dim")

    def _label(self, row: TreeRow) -> Text:
        return tree_label(row, row.decision_id in self._checkpoints)

    def render_label(self, node: TreeNode[str], base_style: Style, style: Style) -> Text:
        """An affected row highlighted as it is drawn (only the rows on screen are): marking
        10,000 affected decisions relabelled every loaded node, 0.1 s of the event loop
        before the impact preview showed."""
        if node.data in self._affected:
            style = AFFECTED_STYLE + style
        text = super().render_label(node, base_style, style)
        fitted = self._fitted_label(node, text.cell_len)
        if fitted is None:
            return text
        fitted.stylize(style)
        return Text.assemble(text[: len(text) - len(node.label)], fitted)

    def _fitted_label(self, node: TreeNode[str], drawn: int) -> Text | None:
        """The node's label with as much of its chosen option as the pane has room for:
        more than the label as built (cut to :data:`TREE_OPTION`) where there is room, less
        where that would run past the pane's edge, so the numbers and the ``⚑`` after the
        option stay in view (a superseded row keeps its option: the edge cuts its ``[superseded
        by …]``); None when the label as built is right. Drawn rows only, and
        again at each width (the tree's line cache is keyed by it)."""
        if node.data is None:  # the root, drawn before the index is set
            return None
        row = self._rows.get(node.data)
        if row is None:
            return None
        depth = 0
        parent = node.parent
        while parent is not None and parent is not self.root:
            depth, parent = depth + 1, parent.parent
        room = self.scrollable_content_region.width - self.guide_depth * depth - drawn
        shown = min(len(row.chosen_option), TREE_OPTION)
        if room > 0 and shown < len(row.chosen_option):  # more of it fits
            limit = shown + room
        elif room < 0 and row.superseded_by is None:  # cut it, down to the least shown
            limit = max(TREE_OPTION_AT_LEAST, shown + room)
            if limit >= shown:
                return None
        else:  # it fits as built, has no more to show, or is a superseded row (its option,
            return None  # not the end of ``[superseded by …]``, is what to keep)
        return tree_label(row, row.decision_id in self._checkpoints, limit)

    def _on_tree_node_expanded(self, event: Tree.NodeExpanded[str]) -> None:
        node = event.node
        if node.data and not node.data.startswith(MORE) and node.data not in self._loaded:
            self._populate(node, node.data)

    def _on_tree_node_selected(self, event: Tree.NodeSelected[str]) -> None:
        node = event.node
        if node.data and node.data.startswith(MORE):
            event.stop()
            key = node.data[len(MORE) :] or None
            parent = node.parent or self.root
            self._populate(parent, key)

    # -- queries and navigation -------------------------------------------------------------

    @property
    def row_count(self) -> int:
        return len(self._rows)

    def row(self, decision_id: str) -> TreeRow | None:
        return self._rows.get(decision_id)

    @property
    def current(self) -> str | None:
        node = self.cursor_node
        if node is None or node.data is None or node.data.startswith(MORE):
            return None
        return node.data

    def reveal(self, decision_id: str) -> bool:
        """Expand and load what it takes to show ``decision_id``, and put the cursor on it."""
        if decision_id not in self._rows:
            return False
        chain: list[str] = []
        at: str | None = decision_id
        while at is not None and at in self._rows:
            chain.append(at)
            at = self._rows[at].parent_decision_id
        parent_key: str | None = None
        parent_node: TreeNode[str] = self.root
        for ident in reversed(chain):
            while ident not in self._node_of and self._loaded.get(parent_key, 0) < len(
                self._kids.get(parent_key, [])
            ):
                self._populate(parent_node, parent_key)
            node = self._node_of[ident]
            if ident != decision_id:
                if ident not in self._loaded:
                    self._populate(node, ident)
                node.expand()
            parent_key, parent_node = ident, node
        self._move_to(self._node_of[decision_id])
        return True

    def find(self, query: str, after: str | None = None) -> str | None:
        """The next decision, in tree order after ``after`` (wrapping round), whose id starts
        with ``query`` or whose type or chosen option contains it (any case)."""
        needle = query.strip().lower()
        if not needle:
            return None
        order = self._in_order()
        start = order.index(after) + 1 if after in order else 0
        for ident in order[start:] + order[:start]:
            row = self._rows[ident]
            if ident.lower().startswith(needle) or any(
                needle in text.lower() for text in (row.chosen_option, row.decision_type)
            ):
                return ident
        return None

    def _in_order(self) -> list[str]:
        out: list[str] = []
        stack = list(reversed(self._kids.get(None, [])))
        while stack:
            row = stack.pop()
            out.append(row.decision_id)
            stack.extend(reversed(self._kids.get(row.decision_id, [])))
        return out

    def parent_of(self, decision_id: str) -> str | None:
        row = self._rows.get(decision_id)
        if row is None or row.parent_decision_id not in self._rows:
            return None
        return row.parent_decision_id

    def next_sibling_of(self, decision_id: str) -> str | None:
        row = self._rows.get(decision_id)
        if row is None:
            return None
        parent = row.parent_decision_id if row.parent_decision_id in self._rows else None
        siblings = self._kids.get(parent, [])
        ids = [r.decision_id for r in siblings]
        i = ids.index(decision_id)
        return ids[i + 1] if i + 1 < len(ids) else None

    def highlight(self, decision_ids: Iterable[str]) -> None:
        """Mark the decisions a correction would affect (and clear the old marks)."""
        new = frozenset(decision_ids)
        if new != self._affected:
            self._affected = new
            self._line_cache.clear()  # the drawn rows, cached by Textual: drawn again
            self.refresh()

    @property
    def affected(self) -> frozenset[str]:
        return self._affected
