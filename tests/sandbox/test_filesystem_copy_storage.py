"""What a filesystem_copy sandbox stores per checkpoint, and stores made in the old format.

Trees are format 2 (binary, deltas of the folder's previous tree) and the lstat details
live in the local ``index`` file; sandboxes written before that (format-1 JSON trees with
lstat details, a JSON ``index``) must still open, roll back, checkpoint and apply.
"""

from __future__ import annotations

import json
import os
import random
import stat
import zlib
from pathlib import Path

import pytest

from cleveragents_tui.domain.ids import new_ulid
from cleveragents_tui.sandbox.base import Change, ChangeKind, CheckpointMissingError
from cleveragents_tui.sandbox.filesystem_copy import FilesystemCopyStrategy
from cleveragents_tui.sandbox.home import META
from cleveragents_tui.sandbox.objectstore.files import fs_now
from cleveragents_tui.sandbox.objectstore.names import new_ref
from cleveragents_tui.sandbox.objectstore.objects import ObjectStore
from cleveragents_tui.sandbox.objectstore.trees import MAX_CHAIN, Entry, Trees
from tests.sandbox.test_filesystem_copy import build_tree, fs_resource, tree_state

PLAN = new_ulid()


def stored_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def test_a_checkpoint_stores_little_besides_the_changed_content(tmp_path: Path) -> None:
    """10 files of 2 KB change, one in each of 10 folders of 50: the trees, pack rows and
    record of the checkpoint come to at most 6 KiB (format 1 stored 20-35 KiB of trees)."""
    rng = random.Random(3)
    real = tmp_path / "real"
    for folder in range(10):
        (real / f"d{folder}" / "e").mkdir(parents=True)
        for n in range(50):
            (real / f"d{folder}" / "e" / f"f{n:03d}.txt").write_bytes(
                rng.randbytes(1024).hex().encode()
            )
    sandbox = FilesystemCopyStrategy().create(fs_resource(real), PLAN, tmp_path / "sandboxes")
    sandbox.checkpoint()
    objects, index = sandbox.home / "objects", sandbox.home / "index"
    index_sizes = set()
    for _ in range(4):
        before = stored_bytes(objects)
        content = 0
        for folder in range(10):
            data = rng.randbytes(1024).hex().encode()
            (sandbox.workdir / f"d{folder}" / "e" / f"f{rng.randrange(50):03d}.txt").write_bytes(
                data
            )
            content += len(zlib.compress(data, 1))
        sandbox.checkpoint()
        assert stored_bytes(objects) - before - content <= 6 * 1024
        index_sizes.add(index.stat().st_size)
    assert len(index_sizes) == 1  # the lstat cache is rewritten in place, not added to


def test_long_delta_chains_survive_dropping_and_reopening(tmp_path: Path) -> None:
    """More checkpoints of one folder than a delta chain may be long, the early ones
    dropped (their trees are bases of later deltas): every checkpoint kept rolls back
    exactly from a reopened sandbox."""
    real = tmp_path / "real"
    real.mkdir()
    for n in range(20):
        (real / f"f{n:02d}.txt").write_text(f"file {n}\n")
    strategy = FilesystemCopyStrategy(durable=False)
    sandbox = strategy.create(fs_resource(real), PLAN, tmp_path / "sandboxes")
    states = {}
    for step in range(MAX_CHAIN + 8):
        (sandbox.workdir / f"f{step % 20:02d}.txt").write_text(f"step {step}\n")
        if step % 7 == 3:
            (sandbox.workdir / f"new{step}.txt").write_text("added\n")
        if step % 11 == 5:
            (sandbox.workdir / f"f{(step + 1) % 20:02d}.txt").unlink()
        ref = sandbox.checkpoint()
        states[ref] = tree_state(sandbox.workdir)
    refs = sorted(states)
    for ref in refs[:30]:
        sandbox.drop_checkpoint(ref)
    reopened = strategy.open(fs_resource(real), PLAN, tmp_path / "sandboxes")
    assert reopened.checkpoints() == refs[30:]
    for ref in reversed(refs[30:]):
        reopened.verify(ref)
        reopened.rollback(ref)
        assert tree_state(reopened.workdir) == states[ref]


def test_a_damaged_stat_cache_only_means_reading_files_again(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    build_tree(real)
    strategy = FilesystemCopyStrategy(durable=False)
    sandbox = strategy.create(fs_resource(real), PLAN, tmp_path / "sandboxes")
    first = sandbox.checkpoint()
    guide = sandbox.workdir / "docs" / "guide.txt"
    st = guide.stat()
    guide.write_text("GUIDE " * 100)  # same size; mtime put back: only ctime tells
    os.utime(guide, ns=(st.st_atime_ns, st.st_mtime_ns))
    index = sandbox.home / "index"
    data = bytearray(index.read_bytes())
    data[len(data) // 2] ^= 0xFF
    index.write_bytes(bytes(data))
    reopened = strategy.open(fs_resource(real), PLAN, tmp_path / "sandboxes")
    second = reopened.checkpoint()
    assert reopened.diff(first, second) == [Change("docs/guide.txt", ChangeKind.MODIFIED)]
    assert reopened.read(second, "docs/guide.txt") == b"GUIDE " * 100


# --- a sandbox written in format 1 -------------------------------------------------------------


def _old_tree(store: ObjectStore, trees: Trees, folder: Path, *, top: bool) -> str:
    """Folder as format-1 trees with lstat details, as sandboxes made before format 2 were."""
    tree: dict[str, Entry] = {}
    for item in os.scandir(folder):
        if top and item.name == ".git":
            continue
        st = item.stat(follow_symlinks=False)
        mode = stat.S_IMODE(st.st_mode)
        if stat.S_ISLNK(st.st_mode):
            target = os.readlink(item.path)
            tree[item.name] = Entry("l", 0o777, len(target), 0, 0, 0, target)
        elif stat.S_ISDIR(st.st_mode):
            inner = _old_tree(store, trees, Path(item.path), top=False)
            tree[item.name] = Entry("d", mode, 0, 0, 0, 0, inner)
        else:
            oid = store.put_bytes(Path(item.path).read_bytes())
            tree[item.name] = Entry(
                "f", mode, st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns, oid
            )
    return trees.save(tree, top=top)  # Trees() without compact: format 1


def _old_snapshot(home: Path, folder: Path) -> dict[str, object]:
    store = ObjectStore(home / "objects", durable=False)
    stamp = fs_now(home / "stamp")
    with store.batch():
        root = _old_tree(store, Trees(store), folder, top=True)
    return {"v": 1, "root": root, "stamp": stamp}


def _old_checkpoint(home: Path, seq: int) -> str:
    snapshot = _old_snapshot(home, home / "work")
    ref = new_ref(seq)
    store = ObjectStore(home / "objects", durable=False)
    with store.batch():
        store.add_note(json.dumps({**snapshot, "checkpoint": ref}, sort_keys=True).encode())
    (home / "index").write_text(json.dumps(snapshot))  # format 1's index: JSON
    return ref


def test_a_sandbox_written_in_format_1_opens_rolls_back_and_applies(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    build_tree(real)
    strategy = FilesystemCopyStrategy(durable=False)
    home = strategy.create(fs_resource(real), PLAN, tmp_path / "sandboxes").home
    work = home / "work"
    # Rewrite it as format 1 wrote it: every object, the origin, checkpoints, the index.
    for item in (home / "objects").iterdir():
        if item.is_dir():
            for inner in item.iterdir():
                inner.unlink()
    meta = json.loads((home / META).read_text())
    meta["origin"] = _old_snapshot(home, real)
    (home / META).write_text(json.dumps(meta))
    first = _old_checkpoint(home, 1)
    at_first = tree_state(work)
    (work / "README.md").write_text("changed\n")
    (work / "docs" / "guide.txt").unlink()
    (work / "src" / "new.py").write_text("new\n")
    second = _old_checkpoint(home, 2)
    at_second = tree_state(work)

    sandbox = strategy.open(fs_resource(real), PLAN, tmp_path / "sandboxes")
    assert sandbox.checkpoints() == [first, second]
    sandbox.verify(first)
    sandbox.rollback(first)
    assert tree_state(work) == at_first
    (work / "src" / "main.py").write_text("print('format 2')\n")
    third = sandbox.checkpoint()  # format-2 trees, deltas of format-1 ones
    assert sandbox.diff(first, third) == [Change("src/main.py", ChangeKind.MODIFIED)]
    sandbox.rollback(second)
    assert tree_state(work) == at_second
    reopened = strategy.open(fs_resource(real), PLAN, tmp_path / "sandboxes")
    reopened.rollback(third)
    assert (work / "src" / "main.py").read_text() == "print('format 2')\n"
    result = reopened.apply()
    assert {change.path for change in result.changes} == {"src/main.py"}
    assert (real / "src" / "main.py").read_text() == "print('format 2')\n"


def test_garbage_collection_keeps_what_a_delta_base_names(tmp_path: Path) -> None:
    """A folder's tree that is both a checkpoint's and the base of a newer delta keeps its
    own files when another checkpoint is dropped, whichever tree is walked first."""
    real = tmp_path / "real"
    (real / "d").mkdir(parents=True)
    for n in range(4):
        (real / "d" / f"f{n}.txt").write_text(f"file {n}\n")
    strategy = FilesystemCopyStrategy(durable=False)
    sandbox = strategy.create(fs_resource(real), PLAN, tmp_path / "sandboxes")
    (sandbox.workdir / "d" / "f0.txt").write_text("first\n")
    first = sandbox.checkpoint()
    at_first = tree_state(sandbox.workdir)
    (sandbox.workdir / "d" / "f0.txt").write_text("applied\n")
    sandbox.apply()  # the origin is now a delta of the first checkpoint's folder
    sandbox.drop_checkpoint(sandbox.checkpoint())
    sandbox.verify(first)
    sandbox.rollback(first)
    assert tree_state(sandbox.workdir) == at_first


def test_a_scratch_checkpoint_reads_the_state_now_and_leaves_nothing(tmp_path: Path) -> None:
    """What a correction's diff reads of the new attempt: inside the block the state now
    diffs and reads like a checkpoint's; afterwards its reference is gone and the object
    store's files are as they were (no record, no drop, no repack to flush)."""
    real = tmp_path / "real"
    build_tree(real)
    sandbox = FilesystemCopyStrategy().create(fs_resource(real), PLAN, tmp_path / "sandboxes")
    base = sandbox.checkpoint()
    objects = sandbox.home / "objects"
    (sandbox.workdir / "README.md").write_text("changed\n")
    (sandbox.workdir / "new.txt").write_text("new\n")
    before = {path: path.read_bytes() for path in objects.rglob("*") if path.is_file()}
    with sandbox.scratch_checkpoint() as now:
        assert set(sandbox.diff(base, now)) == {
            Change("README.md", ChangeKind.MODIFIED),
            Change("new.txt", ChangeKind.ADDED),
        }
        assert sandbox.read(now, "new.txt") == b"new\n"
        with pytest.raises(CheckpointMissingError):  # the records are read from the disk again
            sandbox.read(new_ref(999), "new.txt")
        assert sandbox.read(now, "new.txt") == b"new\n"  # which does not hold this one
    assert {path: path.read_bytes() for path in objects.rglob("*") if path.is_file()} == before
    assert sandbox.checkpoints() == [base]
    with pytest.raises(CheckpointMissingError):
        sandbox.read(now, "new.txt")


def test_a_checkpoint_after_a_scratch_one_stores_what_it_names(tmp_path: Path) -> None:
    """The scratch checkpoint's objects were never stored: a real checkpoint of the same
    state right after it stores them, so a sandbox opened afresh reads it back."""
    real = tmp_path / "real"
    build_tree(real)
    root = tmp_path / "sandboxes"
    sandbox = FilesystemCopyStrategy().create(fs_resource(real), PLAN, root)
    (sandbox.workdir / "src" / "main.py").write_text("print('changed')\n")
    with sandbox.scratch_checkpoint():
        pass
    ref = sandbox.checkpoint()
    reopened = FilesystemCopyStrategy().open(fs_resource(real), PLAN, root)
    reopened.verify(ref)
    assert reopened.read(ref, "src/main.py") == b"print('changed')\n"
