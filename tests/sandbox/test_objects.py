"""The object store, tree objects, path rules and the symlink-safe writer."""

from __future__ import annotations

import json
import os
import posixpath
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cleveragents_tui.sandbox.base import CheckpointMissingError, SandboxError
from cleveragents_tui.sandbox.git.records import Record
from cleveragents_tui.sandbox.objectstore import objects, packs
from cleveragents_tui.sandbox.objectstore.files import fs_now
from cleveragents_tui.sandbox.objectstore.names import check_entry_path, check_link_target
from cleveragents_tui.sandbox.objectstore.objects import ObjectStore
from cleveragents_tui.sandbox.objectstore.tree_writer import (
    TreeWriter,
    lstat_path,
    read_path,
    remove_tree,
)
from cleveragents_tui.sandbox.objectstore.trees import (
    FULL,
    MAX_CHAIN,
    Entry,
    Trees,
    decode_object,
    decode_tree,
    encode_delta,
    encode_entries,
    encode_tree,
    is_clean,
)
from cleveragents_tui.sandbox.safety import UnsafeInputError, safe_relative_path


@pytest.fixture
def store(tmp_path: Path) -> ObjectStore:
    created = ObjectStore(tmp_path / "objects", durable=True)
    created.create()
    return created


def loose_files(store: ObjectStore) -> list[Path]:
    return [p for p in store.root.glob("??/*") if p.is_file()]


# --- the object store --------------------------------------------------------------------------


def test_put_and_read_round_trip_and_deduplicate(store: ObjectStore) -> None:
    oid = store.put_bytes(b"hello")
    assert oid == "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
    assert store.put_bytes(b"hello") == oid
    assert store.read_bytes(oid) == b"hello"
    assert store.has(oid)
    assert len(loose_files(store)) == 1
    store.sync()
    store.check(oid)


def journals(store: ObjectStore) -> list[Path]:
    return sorted((store.root / "packs").glob("*.log"))


def test_batches_append_to_one_journal(store: ObjectStore) -> None:
    with store.batch():
        ids = [store.put_bytes(f"object {n}".encode()) for n in range(50)]
        assert store.read_bytes(ids[3]) == b"object 3"  # readable before it is published
        store.add_note(b"first")
    with store.batch():
        more = store.put_bytes(b"second batch")
        store.add_note(b"second")
    assert loose_files(store) == []
    assert len(journals(store)) == 1
    assert list((store.root / "packs").glob("*.pack")) == []
    fresh = ObjectStore(store.root, durable=True)
    assert [fresh.read_bytes(oid) for oid in ids] == [f"object {n}".encode() for n in range(50)]
    assert fresh.oids() == {*ids, more}
    assert fresh.notes() == [b"first", b"second"]
    with fresh.batch():
        fresh.add_note(b"third")
    assert len(journals(store)) == 2  # another store object writes a journal of its own
    assert sorted(ObjectStore(store.root, durable=False).notes()) == [b"first", b"second", b"third"]


@pytest.mark.parametrize("spilled", [False, True], ids=["in memory", "spilled to a file"])
def test_a_large_batch_becomes_a_pack_of_its_own(
    store: ObjectStore, monkeypatch: pytest.MonkeyPatch, spilled: bool
) -> None:
    monkeypatch.setattr(objects, "SEGMENT_LIMIT", 100)
    if spilled:
        monkeypatch.setattr(packs, "SPILL", 100)
    with store.batch():
        ids = [store.put_bytes(os.urandom(64)) for _ in range(5)]
        assert store.read_bytes(ids[0]) and store.read_bytes(ids[-1])
        store.add_note(b"big")
    assert journals(store) == []
    assert len(list((store.root / "packs").glob("*.pack"))) == 1
    assert list((store.root / "tmp").iterdir()) == []
    fresh = ObjectStore(store.root, durable=False)
    for oid in ids:
        fresh.check(oid)
    assert fresh.notes() == [b"big"]


def test_a_durable_batch_is_one_flush(store: ObjectStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Loose objects, then the journal once; its folder only when the journal is new."""
    flushed: list[str] = []
    real_fsync, real_fdatasync = os.fsync, os.fdatasync

    def fsync(fd: int) -> None:
        flushed.append("fsync " + os.readlink(f"/proc/self/fd/{fd}").rsplit("/", 2)[-2])
        real_fsync(fd)

    def fdatasync(fd: int) -> None:
        flushed.append("fdatasync " + os.readlink(f"/proc/self/fd/{fd}").rsplit(".", 1)[-1])
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "fdatasync", fdatasync)
    monkeypatch.setattr(packs, "_fdatasync", fdatasync)
    for n in range(3):
        with store.batch():
            store.put_bytes(f"small {n}".encode())
            store.add_note(b"record")
    assert flushed == ["fdatasync log", "fsync objects", "fdatasync log", "fdatasync log"]
    flushed.clear()
    big = store.root.parent / "big"
    big.write_bytes(os.urandom(1 << 16) * 80)  # 5 MiB: a loose object
    fd = os.open(big, os.O_RDONLY)
    try:
        with store.batch():
            store.put_fd(fd)
            store.add_note(b"record")
    finally:
        os.close(fd)
    assert flushed[-1] == "fdatasync log"  # after the loose object and its folders
    assert len(flushed) > 1 and all(f.startswith("fsync") for f in flushed[:-1])


def test_a_torn_journal_end_is_skipped(store: ObjectStore) -> None:
    with store.batch():
        kept = store.put_bytes(b"acknowledged")
        store.add_note(b"kept")
    (journal,) = journals(store)
    size = journal.stat().st_size
    with store.batch():
        torn = store.put_bytes(b"never acknowledged")
        store.add_note(b"torn")
    journal.chmod(0o644)
    with open(journal, "r+b") as handle:  # a crash in the middle of the second append
        handle.truncate(size + 20)
    fresh = ObjectStore(store.root, durable=False)
    assert fresh.notes() == [b"kept"]
    fresh.check(kept)
    assert not fresh.has(torn)
    with fresh.batch():
        again = fresh.put_bytes(b"after the crash")
    assert ObjectStore(store.root, durable=False).has(again)


def test_a_damaged_segment_is_stepped_over(store: ObjectStore) -> None:
    sizes = []
    for n in range(3):
        with store.batch():
            store.put_bytes(f"batch {n}".encode())
            store.add_note(f"note {n}".encode())
        sizes.append(journals(store)[0].stat().st_size)
    (journal,) = journals(store)
    data = bytearray(journal.read_bytes())
    data[sizes[0] + 3] ^= 0xFF  # inside the second batch
    journal.chmod(0o644)
    journal.write_bytes(bytes(data))
    assert ObjectStore(store.root, durable=False).notes() == [b"note 0", b"note 2"]


def test_a_failed_batch_leaves_nothing(store: ObjectStore) -> None:
    with pytest.raises(RuntimeError), store.batch():
        oid = store.put_bytes(b"lost")
        raise RuntimeError("checkpoint failed")
    assert not store.has(oid)
    assert list((store.root / "packs").iterdir()) == []
    assert list((store.root / "tmp").iterdir()) == []


def test_large_content_is_streamed(store: ObjectStore, tmp_path: Path) -> None:
    data = os.urandom(1 << 16) * 96  # 6 MiB
    source = tmp_path / "big"
    source.write_bytes(data)
    for batch in (False, True):
        fd = os.open(source, os.O_RDONLY)
        try:
            if batch:
                with store.batch():
                    oid, size = store.put_fd(fd)
            else:
                oid, size = store.put_fd(fd)
        finally:
            os.close(fd)
        assert size == len(data)
        out = tmp_path / "copy"
        with open(out, "wb") as handle:
            store.copy_to_fd(oid, handle.fileno(), size)
        assert out.read_bytes() == data
        with open(out, "wb") as handle, pytest.raises(CheckpointMissingError):
            store.copy_to_fd(oid, handle.fileno(), size - 1)


def test_damaged_objects_are_detected(store: ObjectStore) -> None:
    oid = store.put_bytes(b"precious")
    path = loose_files(store)[0]
    path.chmod(0o644)
    path.write_bytes(b"garbage")
    with pytest.raises(CheckpointMissingError):
        store.read_bytes(oid)
    with pytest.raises(CheckpointMissingError):
        store.check(oid)
    path.unlink()
    with pytest.raises(CheckpointMissingError):
        store.check(oid)
    with pytest.raises(UnsafeInputError):
        store.read_bytes("../../etc/passwd")


def test_another_objects_content_under_an_id_is_refused(store: ObjectStore) -> None:
    real = store.put_bytes(b"real")
    fake = store.put_bytes(b"fake")
    (store.root / fake[:2] / fake[2:]).replace(store.root / real[:2] / real[2:])
    with pytest.raises(CheckpointMissingError, match="does not match"):
        store.read_bytes(real)


def test_sweep_keeps_what_is_needed_and_repacks(store: ObjectStore) -> None:
    with store.batch():
        packed = [store.put_bytes(f"p{n}".encode()) for n in range(10)]
        store.add_note(b"keep me")
        store.add_note(b"drop me")
    loose = [store.put_bytes(f"l{n}".encode()) for n in range(3)]
    keep = {packed[0], packed[5], loose[1]}
    assert store.sweep(keep, lambda note: note != b"drop me") == 10
    assert store.oids() == keep
    fresh = ObjectStore(store.root, durable=False)
    assert fresh.oids() == keep
    assert fresh.notes() == [b"keep me"]
    for oid in keep:
        fresh.check(oid)
    assert len(list((store.root / "packs").glob("*.pack"))) == 1
    assert journals(store) == []
    with store.batch():  # the journal was rewritten: later batches start a new one
        later = store.put_bytes(b"later")
    assert ObjectStore(store.root, durable=False).has(later)
    assert store.sweep(set()) == 4
    assert store.oids() == set()


# --- trees and paths ---------------------------------------------------------------------------

FILE = Entry("f", 0o644, 5, 1, 2, 3, "a" * 64)


def test_tree_round_trip() -> None:
    tree = {"b.txt": FILE, "a": Entry("d", 0o755, 0, 0, 0, 0, "b" * 64)}
    tree["l"] = Entry("l", 0o777, 1, 0, 0, 0, "b.txt")
    assert decode_tree(encode_tree(tree), top=True) == tree


@pytest.mark.parametrize(
    "rows",
    [
        [["x", "f", 0o644, 1, 0, 0, 0, "not-an-oid"]],
        [["x", "f", -1, 1, 0, 0, 0, "a" * 64]],
        [["x", "f", 0o644, -1, 0, 0, 0, "a" * 64]],
        [["x", "f", True, 1, 0, 0, 0, "a" * 64]],
        [["x", "b", 0o644, 1, 0, 0, 0, "a" * 64]],
        [["b", "f", 0o644, 1, 0, 0, 0, "a" * 64], ["a", "f", 0o644, 1, 0, 0, 0, "a" * 64]],
        [["", "f", 0o644, 1, 0, 0, 0, "a" * 64]],
        [[".", "d", 0o755, 0, 0, 0, 0, "a" * 64]],
        [["l", "l", 0o777, 0, 0, 0, 0, None]],
    ],
)
def test_malformed_tree_rows_are_refused(rows: list[list[object]]) -> None:
    with pytest.raises(UnsafeInputError):
        decode_tree(json.dumps({"v": 1, "e": rows}).encode(), top=False)


def test_top_level_rules_apply_only_at_the_top() -> None:
    row = [".git", "d", 0o755, 0, 0, 0, 0, "a" * 64]
    data = json.dumps({"v": 1, "e": [row]}).encode()
    assert ".git" in decode_tree(data, top=False)
    with pytest.raises(UnsafeInputError):
        decode_tree(data, top=True)


def test_compact_trees_keep_content_and_store_changes_as_deltas(store: ObjectStore) -> None:
    trees = Trees(store, compact=True)
    tree = {f"f{n:02d}": FILE._replace(ref=f"{n:064x}") for n in range(20)}
    tree["l"] = Entry("l", 0o777, 4, 0, 0, 0, "f\udcff1")  # a target from os.fsdecode
    with store.batch():
        tree["d"] = Entry("d", 0o755, 0, 0, 0, 0, trees.save({"x": FILE}))
        base = trees.save(tree, top=True)
        changed = {**tree, "f03": FILE._replace(ref="c" * 64), "new": FILE}
        del changed["f07"]
        delta = trees.save(changed, top=True, base=base)
    content = {name: entry._replace(ino=0, ctime_ns=0) for name, entry in changed.items()}
    fresh = Trees(store, compact=True)
    assert fresh.load(delta, top=True) == content
    assert list(fresh.load(delta, top=True)) == sorted(content)
    assert len(store.read_bytes(delta)) < 200  # the two changes, not the 22 entries
    assert base in fresh.reachable([delta])  # a delta keeps its base from garbage collection


@pytest.mark.parametrize(
    "data",
    [
        FULL + b"\x01",  # truncated
        FULL + encode_entries({"a": FILE}, stats=False)[:-1],
        FULL + encode_entries({"..": FILE}, stats=False),
        FULL + encode_entries({"a/b": FILE}, stats=False),
        FULL + encode_entries({"b": FILE}, stats=False) + encode_entries({"a": FILE}, stats=False),
        FULL + encode_entries({"l": Entry("l", 0o644, 1, 0, 0, 0, "x")}, stats=False),
        FULL + b"\x09" + encode_entries({"a": FILE}, stats=False)[1:],  # kind 9
        encode_delta("a" * 64, ["x", "x"], {}),
        encode_delta("a" * 64, ["x"], {"x": FILE}),
        b"\0CT9F",
    ],
)
def test_malformed_compact_trees_are_refused(data: bytes) -> None:
    with pytest.raises(UnsafeInputError):
        decode_object(data, top=False)


def test_compact_trees_apply_the_top_level_rules_only_at_the_top() -> None:
    for name in (".git", "~home"):
        data = FULL + encode_entries({name: Entry("d", 0o755, 0, 0, 0, 0, "a" * 64)}, stats=False)
        assert name in decode_object(data, top=False)[2]
        with pytest.raises(UnsafeInputError):
            decode_object(data, top=True)


def test_a_delta_without_its_base_or_past_the_chain_limit_is_refused(store: ObjectStore) -> None:
    trees = Trees(store, compact=True)
    orphan = store.put_bytes(encode_delta("d" * 64, [], {"a": FILE}))
    with pytest.raises(CheckpointMissingError):
        trees.load(orphan)
    top = store.put_bytes(FULL + encode_entries({"a": FILE}, stats=False))
    for n in range(MAX_CHAIN + 1):
        top = store.put_bytes(encode_delta(top, [], {"a": FILE._replace(size=n)}))
    with pytest.raises(UnsafeInputError):
        Trees(store, compact=True).load(top)


@pytest.mark.parametrize("raw", ["a", "a/b", "a b/c.txt", ".hidden", "a/.git", "x..y"])
def test_canonical_paths_are_accepted(raw: str) -> None:
    assert check_entry_path(raw) == raw


@pytest.mark.parametrize(
    "raw", ["", ".", "./a", "a/./b", "a//b", "a/", "/a", "../a", "a/../b", "a\x00", ".git/x", "~/x"]
)
def test_other_paths_are_refused(raw: str) -> None:
    with pytest.raises(UnsafeInputError):
        check_entry_path(raw)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="a/.~\\\x00\n\udc80git", max_size=12))
def test_entry_paths_are_the_canonical_safe_relative_paths(raw: str) -> None:
    """Whatever an agent or archive sends: accepted exactly when it is a safe relative path
    written canonically (the fast check of plain names agrees with the full one)."""
    try:
        expected = str(safe_relative_path(raw)) == raw and "." not in raw.split("/")
    except UnsafeInputError:
        expected = False
    try:
        accepted = check_entry_path(raw) == raw
    except UnsafeInputError:
        accepted = False
    assert accepted == expected


@pytest.mark.parametrize("path", [5, None, ["a"], {"a": 1}, 0])
def test_a_record_naming_a_path_that_is_no_text_is_refused(path: object) -> None:
    """A damaged record is refused with one line, not a traceback."""
    damaged = json.dumps(
        {"v": 1, "stamp": 0, "file": 0o644, "exec": 0o755, "dirs": [[path, 0o755]],
         "modes": [], "ignored": []}
    ).encode()  # fmt: skip
    with pytest.raises(UnsafeInputError):
        Record.decode(damaged)


@pytest.mark.parametrize(
    ("link", "target"),
    [
        ("l", "a"),
        ("l", "./a/b"),
        ("d/l", "../a"),
        ("d/e/l", "../../a/b"),
        ("d/l", ".."),
        ("l", "."),
    ],
)
def test_inside_link_targets(link: str, target: str) -> None:
    assert check_link_target(link, target) == target


@pytest.mark.parametrize(
    ("link", "target"),
    [("l", ".."), ("l", "/etc"), ("d/l", "../.."), ("l", "a/../.."), ("l", "a/.."), ("l", "")],
)
def test_escaping_link_targets(link: str, target: str) -> None:
    with pytest.raises(UnsafeInputError):
        check_link_target(link, target)


_PARTS = st.sampled_from(["a", "b", "..", ".", ""])


@settings(derandomize=True)
@given(
    link=st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=4),
    target=st.lists(_PARTS, min_size=1, max_size=6),
)
def test_accepted_targets_resolve_inside(link: list[str], target: list[str]) -> None:
    """Over real directories, an accepted target never climbs above the root."""
    link_path, raw = "/".join(link), "/".join(target)
    try:
        check_link_target(link_path, raw)
    except UnsafeInputError:
        return
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(link_path), raw))
    assert resolved != ".." and not resolved.startswith("../")


def test_racy_entries_are_not_trusted(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("x")
    st_now = path.lstat()
    mode, size, mtime = st_now.st_mode & 0o777, st_now.st_size, st_now.st_mtime_ns
    entry = Entry("f", mode, size, mtime, st_now.st_ino, st_now.st_ctime_ns, "a" * 64)
    assert is_clean(entry, st_now, st_now.st_ctime_ns + 1)
    assert not is_clean(entry, st_now, st_now.st_ctime_ns)  # recorded in the same tick
    assert not is_clean(entry._replace(ino=entry.ino + 1), st_now, st_now.st_ctime_ns + 1)
    assert fs_now(tmp_path / "stamp") >= st_now.st_ctime_ns


# --- the writer --------------------------------------------------------------------------------


def test_writer_refuses_to_write_through_a_symlinked_folder(
    store: ObjectStore, tmp_path: Path
) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    os.symlink(outside, root / "link")
    oid = store.put_bytes(b"payload")
    entry = Entry("f", 0o644, 7, 0, 0, 0, oid)
    with TreeWriter(root, durable=False) as writer:
        with pytest.raises(SandboxError, match="symlink"):
            writer.write_object("link/file", store, entry, mtime_ns=None)
        with pytest.raises(SandboxError, match="symlink"):
            writer.make_dir("link/sub")
        with pytest.raises(UnsafeInputError):
            writer.write_object("../outside/file", store, entry, mtime_ns=None)
        with pytest.raises(UnsafeInputError):
            writer.symlink("evil", "../outside")
        writer.write_object("link", store, entry, mtime_ns=123, in_place=True)
    assert list(outside.iterdir()) == []
    assert (root / "link").read_bytes() == b"payload"
    assert (root / "link").lstat().st_mtime_ns == 123


def test_removing_a_link_to_a_folder_keeps_the_folder(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "d").mkdir(parents=True)
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    os.symlink(outside, root / "d" / "link")
    with TreeWriter(root, durable=True) as writer:
        writer.remove("d")
    assert not (root / "d").exists()
    assert (outside / "keep.txt").read_text() == "keep"
    remove_tree(root)
    assert not root.exists()
    assert (outside / "keep.txt").read_text() == "keep"


def test_path_readers_do_not_follow_links(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret").write_text("secret")
    os.symlink(outside, root / "link")
    os.symlink(outside / "secret", root / "file-link")
    assert lstat_path(root, "link/secret") is None
    with pytest.raises(OSError, match=r"symbolic links|Not a directory"):
        read_path(root, "link/secret")
    with pytest.raises((OSError, SandboxError)):
        read_path(root, "file-link")
