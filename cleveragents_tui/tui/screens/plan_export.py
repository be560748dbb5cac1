"""The plan screen's export (`x`): the tree as shown, to a file, a browser download, or the
export folder of a browser session; written in a thread."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

from textual import work

from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.views import PlanTree
from cleveragents_tui.engine import plan_tree
from cleveragents_tui.export.tree_file import export_tree, format_of
from cleveragents_tui.tui.modals.confirm import ConfirmModal
from cleveragents_tui.tui.modals.export import ExportModal
from cleveragents_tui.tui.screens.plan_base import PlanScreenBase
from cleveragents_tui.tui.web_exports import (
    rendered,
    save_in_folder,
    web_target,
    where_exports_go,
)


class PlanExport(PlanScreenBase):
    """`x` on the plan screen."""

    @work(exclusive=True, group="export", exit_on_error=False)
    async def action_export(self) -> None:
        """Write the tree as shown (superseded branches included when they are shown)."""
        web = self.app.is_web
        default = Path(f"plan-{self.plan_id[:10]}.png")
        path = await self.app.push_screen_wait(ExportModal(default, where_exports_go(web)))
        if path is None:
            return
        try:
            format_of(path)
            target = web_target(str(path)) if web else path.expanduser()
        except UserError as exc:
            self.notify(str(exc), title="Export refused", severity="error")
            return
        if target is None:  # in a browser without --export-dir: a download
            self._export_in_thread(lambda tree: self._download(tree, path.name))
            return
        path = target
        force = False
        if path.exists():
            force = await self.app.push_screen_wait(
                ConfirmModal(f"{path} exists. Replace it?", title="Export", yes="Replace")
            )
            if not force:
                return
        self.notify(f"exporting to {path}…")
        if web:  # into the export folder: no link planted there meanwhile is followed
            name = path.name
            self._export_in_thread(lambda tree: _save(tree, name, force))
            return
        self._export_in_thread(lambda tree: export_tree(tree, path, force=force))

    @work(thread=True, exclusive=True, group="export-run", exit_on_error=False)
    def _export_in_thread(self, write: Callable[[PlanTree], str]) -> None:
        """Read the tree as shown and hand it to ``write``, which says what it did."""
        try:
            tree = plan_tree(self.store, self.plan_id, show_superseded=self.show_superseded)
            done = write(tree)
        except (UserError, OSError) as exc:
            self.app.call_from_thread(
                self.notify, str(exc), title="Export failed", severity="error"
            )
            return
        self.app.call_from_thread(self.notify, done)

    def _download(self, tree: PlanTree, name: str) -> str:
        """Browser mode: the export goes to the browser, nothing stays on the server."""
        data = rendered(tree, name)
        self.app.call_from_thread(self.app.deliver_binary, io.BytesIO(data), save_filename=name)
        return f"sent {name} to your browser ({len(data)} bytes)"


def _save(tree: PlanTree, name: str, replace: bool) -> str:
    """Browser mode with --export-dir: the file goes into that folder only."""
    data = rendered(tree, name)
    path = save_in_folder(name, data, replace=replace)
    return f"wrote {path} ({len(data)} bytes)"
