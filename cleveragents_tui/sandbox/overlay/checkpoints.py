"""The overlay sandbox's checkpoints: sealed layers, and the views kept when rolled past.

A checkpoint seals the top layer; a rollback deletes the layers above one, keeping the
merged view at each it goes back past (``kept/``), so a correction's diff can still read it;
dropping a checkpoint merges its layer into the one above (see the package docstring).
"""

from __future__ import annotations

from cleveragents_tui.sandbox.base import CheckpointMissingError
from cleveragents_tui.sandbox.objectstore.files import read_json_object, write_atomic, write_json
from cleveragents_tui.sandbox.objectstore.names import check_oid, check_ref, ref_seq
from cleveragents_tui.sandbox.objectstore.tree_writer import remove_tree
from cleveragents_tui.sandbox.objectstore.trees import FILE
from cleveragents_tui.sandbox.overlay.files import OverlayFiles
from cleveragents_tui.sandbox.overlay.layers import (
    Layer,
    Node,
    encode_layer,
    fold,
    log_line,
    put_node,
)


class OverlayCheckpoints(OverlayFiles):
    """Checkpoint, verify, roll back and drop: the layer stack's history."""

    def checkpoint(self) -> str:
        """Seal the top layer (its reference is returned) and start a new one."""
        self._alive()
        top = self._layers[-1]
        oid = self._store.put_bytes(encode_layer(top.entries))
        self._store.sync()
        write_json(
            self._layers_dir / top.name / "sealed", {"v": 1, "layer": oid}, durable=self._durable
        )
        self._close_log()
        (self._layers_dir / top.name / "log").unlink(missing_ok=True)
        top.sealed = oid
        self._start_layer(ref_seq(top.name) + 1)
        return top.name

    def verify(self, ref: str) -> None:
        """The layers up to ``ref`` are sealed, intact, and every content object is good."""
        self._alive()
        if self._is_kept(ref):
            for node in self._kept_view(ref).values():
                if node.kind == FILE:
                    self._store.check(node.ref)
            return
        for layer in self._layers[: self._position(ref) + 1]:
            oid = self._sealed_id(layer.name)
            for node in self._read_layer(oid).values():
                if node.kind == FILE:
                    self._store.check(node.ref)

    def rollback(self, ref: str, *, current: str | None = None) -> None:
        """Delete the layers above ``ref`` and start an empty one on top; the checkpoints
        deleted are kept first. Back to a kept checkpoint, every layer goes (kept) and its
        view becomes the one sealed layer."""
        self._alive()
        self.verify(ref)
        if self._is_kept(ref):
            view = self._kept_view(ref)
            self._keep(0)
            self._close_log()
            for layer in self._layers:
                remove_tree(self._layers_dir / layer.name)
            folder = self._layers_dir / ref
            folder.mkdir()
            oid = self._store.put_bytes(encode_layer(view))
            self._store.sync()
            write_json(folder / "sealed", {"v": 1, "layer": oid}, durable=self._durable)
            self._layers = [Layer(ref, dict(view), oid)]
            (self._kept_dir / ref).unlink()
            del self._kept[ref]
        else:
            position = self._position(ref)
            self._keep(position + 1)
            self._close_log()
            for layer in reversed(self._layers[position + 1 :]):
                remove_tree(self._layers_dir / layer.name)
            del self._layers[position + 1 :]
        self._start_layer(ref_seq(ref) + 1)
        self._view = fold([layer.entries for layer in self._layers])
        self._collect_garbage()

    def drop_checkpoint(self, ref: str) -> None:
        """Merge ``ref``'s layer into the one above it; the state at every other ref holds.
        A kept checkpoint is simply forgotten."""
        self._alive()
        if self._is_kept(ref):
            (self._kept_dir / ref).unlink()
            del self._kept[ref]
            self._collect_garbage()
            return
        position = self._position(ref)
        below, above = self._layers[position], self._layers[position + 1]
        merged = dict(below.entries)
        for path in sorted(above.entries):
            put_node(merged, path, above.entries[path])
        folder = self._layers_dir / above.name
        if above.sealed is not None:
            oid = self._store.put_bytes(encode_layer(merged))
            self._store.sync()
            write_json(folder / "sealed", {"v": 1, "layer": oid}, durable=self._durable)
            above.sealed = oid
        else:
            self._close_log()
            lines = b"".join(log_line(path, merged[path]) for path in sorted(merged))
            write_atomic(folder / "log", lines, durable=self._durable)
            self._log = open(folder / "log", "ab")  # noqa: SIM115 - kept open between writes
        above.entries = merged
        remove_tree(self._layers_dir / below.name)
        del self._layers[position]
        self._collect_garbage()

    def checkpoints(self) -> list[str]:
        """The references of the checkpoints kept, oldest first."""
        return [layer.name for layer in self._layers if layer.sealed is not None]

    def _view_at(self, ref: str) -> dict[str, Node]:
        if self._is_kept(ref):
            return self._kept_view(ref)
        return fold([layer.entries for layer in self._layers[: self._position(ref) + 1]])

    def _is_kept(self, ref: str) -> bool:
        """A checkpoint a rollback went back past (a live layer of that name wins)."""
        return check_ref(ref) in self._kept and not any(
            layer.name == ref and layer.sealed is not None for layer in self._layers
        )

    def _kept_view(self, ref: str) -> dict[str, Node]:
        view = self._kept[ref]
        if view is None:
            oid = check_oid(read_json_object(self._kept_dir / ref).get("layer"))
            view = self._kept[ref] = self._read_layer(oid)
        return view

    def _keep(self, start: int) -> None:
        """Save the merged view at every sealed layer from position ``start`` up, before a
        rollback deletes them (a view already saved stays as it is)."""
        view = fold([layer.entries for layer in self._layers[:start]])
        for layer in self._layers[start:]:
            for path in sorted(layer.entries):
                put_node(view, path, layer.entries[path], strict=True)
            if layer.sealed is None or layer.name in self._kept:
                continue
            oid = self._store.put_bytes(encode_layer(view))
            self._store.sync()
            self._kept_dir.mkdir(exist_ok=True)
            write_json(self._kept_dir / layer.name, {"v": 1, "layer": oid}, durable=self._durable)
            self._kept[layer.name] = dict(view)

    def _position(self, ref: str) -> int:
        check_ref(ref)
        for position, layer in enumerate(self._layers):
            if layer.name == ref and layer.sealed is not None:
                return position
        raise CheckpointMissingError(
            f"checkpoint {ref} of {self._resource.resource_id} does not exist",
            "it was dropped, rolled back past, applied, or never made here",
        )

    def _collect_garbage(self) -> None:
        keep: set[str] = set()
        for layer in self._layers:
            if layer.sealed is not None:
                keep.add(layer.sealed)
            keep.update(node.ref for node in layer.entries.values() if node.kind == FILE)
        for ref in self._kept:
            keep.add(check_oid(read_json_object(self._kept_dir / ref).get("layer")))
            keep.update(n.ref for n in self._kept_view(ref).values() if n.kind == FILE)
        self._store.sweep(keep)
