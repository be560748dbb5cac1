"""The overlay sandbox: copy-on-write layers in user space over the real directory.

No mount: the real directory is the read-only *lower* layer, and tools go through this
sandbox's file operations (:meth:`OverlaySandbox.read_bytes`, ``write_bytes``, ``delete``,
``list_dir``, ...), so ``workdir`` is None. Each layer records, per path, what it became: a
file (its content is an object in the shared :class:`ObjectStore`), a directory (*opaque*
when it replaced something, hiding what is below), a symlink, or a *whiteout* (deleted).
A path is looked up from the top layer down and falls through to the real directory.
A rename is recorded as what it leaves: the entries at their new paths and a whiteout at
the old one (:meth:`OverlaySandbox.move`); a mode as the entry's mode (``chmod``), an empty
folder as a directory entry (``make_dirs``), a link as a symlink entry (``symlink``).

Layout of the ``root`` folder given to ``create`` (the sandbox owns it)::

    sandbox.json            plan, strategy, resource, real location
    base.json               lstat of every real path when the sandbox was made (or applied)
    objects/                file contents written through the sandbox
    layers/NNNNNN-xxxxxxxx/ one layer; the name is its checkpoint reference
        log                 the top layer: one JSON record per line, appended per write
        sealed              a checkpointed layer: {"layer": <object id of its records>}
    kept/NNNNNN-xxxxxxxx    a checkpoint rolled back past: {"layer": <object id of the
                            merged view at it, as one layer over the real directory>}

A checkpoint seals the top layer and starts a new one; a rollback deletes the layers above
the checkpoint; dropping a checkpoint merges its layer into the one above. A checkpoint a
rollback goes back past is *kept*, as git_worktree and filesystem_copy keep theirs: its
merged view is saved whole (``kept/``), so a correction's diff can still read the attempt it
replaced, a later rollback (or a restore after a failed one) can go back to it, and the
checkpoint budget can drop it like any other. The real
directory must not change during the plan: :meth:`OverlaySandbox.apply` refuses to write
over a path changed there since the sandbox was made.

Modules, lowest first: :mod:`.layers` (a layer's records, merged and stored), :mod:`.core`
(the layer stack, a path looked up through it), :mod:`.files` (the file operations tools
use), :mod:`.checkpoints` and :mod:`.sandbox` (the sandbox class, one layer each),
:mod:`.strategy`.
"""

from cleveragents_tui.sandbox.overlay.files import EntryKind, OverlayEntry
from cleveragents_tui.sandbox.overlay.sandbox import OverlaySandbox
from cleveragents_tui.sandbox.overlay.strategy import OverlayStrategy

__all__ = ["EntryKind", "OverlayEntry", "OverlaySandbox", "OverlayStrategy"]
