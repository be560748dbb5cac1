"""The decision tree, filled lazily: a node's children are added when it is expanded, in
chunks of :data:`CHUNK` (a "… N more" node loads the next chunk), so a plan of 10,000+
decisions paints its first screen at once (DESIGN.md section 8)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from rich.text import Text
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from cleveragents_tui.domain.views import PlanTree, TreeRow
from cleveragents_tui.tui.render import tree_label

CHUNK = 200
AUTO_EXPAND_BUDGET = 300  # expand breadth-first on open until this many nodes are shown
MORE = "more:"  # node data of a "… N more" node: MORE + the parent's decision id ("" = top)


class DecisionTree(Tree[str]):
    """Node data: a decision id, or ``MORE + parent id`` for a "load more" node."""

    DEFAULT_CSS = """
    DecisionTree { scrollbar-gutter: stable; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("decisions", id=id)
        self.show_root = False
        self.guide_depth = 2
        self._rows: dict[str, TreeRow] = {}
        self._kids: dict[str | None, list[TreeRow]] = {}
        self._node_of: dict[str, TreeNode[str]] = {}
        self._loaded: dict[str | None, int] = {}
        self._more: dict[str | None, TreeNode[str]] = {}
        self._checkpoints: frozenset[str] = frozenset()
        self._affected: frozenset[str] = frozenset()

    # -- loading ----------------------------------------------------------------------------

    def load(self, tree: PlanTree, keep: str | None = None) -> None:
        """Show ``tree``; keep the cursor on decision ``keep`` if it is still there."""
        self._checkpoints = tree.has_checkpoints
        self._rows = {line.row.decision_id: line.row for line in tree.lines}
        kids: dict[str | None, list[TreeRow]] = defaultdict(list)
        for line in tree.lines:  # pre-order: each child list stays in tree order
            parent = line.row.parent_decision_id
            kids[parent if parent in self._rows else None].append(line.row)
        self._kids = dict(kids)
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
        end = min(start + CHUNK, len(kids))
        for row in kids[start:end]:
            has_kids = bool(self._kids.get(row.decision_id))
            child = node.add(
                self._label(row), data=row.decision_id, allow_expand=has_kids, expand=False
            )
            self._node_of[row.decision_id] = child
        self._loaded[key] = end
        if end < len(kids):
            label = Text(f"… {len(kids) - end} more (enter to load)", style="italic dim")
            self._more[key] = node.add_leaf(label, data=MORE + (key or ""))

    def _label(self, row: TreeRow) -> Text:
        return tree_label(
            row, row.decision_id in self._checkpoints, row.decision_id in self._affected
        )

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
        changed = self._affected ^ new
        self._affected = new
        for ident in changed:
            node = self._node_of.get(ident)
            if node is not None:
                node.set_label(self._label(self._rows[ident]))

    @property
    def affected(self) -> frozenset[str]:
        return self._affected
