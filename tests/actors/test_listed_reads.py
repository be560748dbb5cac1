"""Reading the files a workdir's listing named (local/search-files): the same bytes a plain
read gives, and nothing read through a folder or file swapped for a link or a pipe since
the listing — the case a one-by-one resolved read checked, here refused by opening each
step with O_NOFOLLOW."""

from __future__ import annotations

import os
from pathlib import Path

from cleveragents_tui.actors.listed_reads import read_listed
from cleveragents_tui.actors.workdir_files import WorkdirFiles


def _tree(root: Path) -> dict[str, bytes]:
    made = {}
    for n in range(30):
        path = f"pkg{n % 3}/sub{n % 2}/m{n}.py" if n % 5 else f"top{n}.txt"
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        data = f"line of {n}\n".encode() * (n + 1)
        (root / path).write_bytes(data)
        made[path] = data
    return made


def _listed(root: Path) -> list[str]:
    entries, more = WorkdirFiles(root, lambda: None).listing(None, 1000)
    assert not more
    return [e.path for e in entries if e.kind.value == "file"]


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_each_listed_file_reads_as_a_plain_read_does(tmp_path: Path) -> None:
    made = _tree(tmp_path)
    before = _open_fds()

    found = {
        path: (data, size) for path, data, size in read_listed(tmp_path, _listed(tmp_path), 50)
    }

    assert found == {path: (data[:50], len(data)) for path, data in made.items()}
    assert _open_fds() == before  # every folder and file closed


def test_a_folder_or_file_swapped_for_a_link_or_a_pipe_is_not_read(tmp_path: Path) -> None:
    root, outside = tmp_path / "sandbox", tmp_path / "outside"
    _tree(root)
    listed = _listed(root)
    (outside / "sub0").mkdir(parents=True)
    for name in ("m2.py", "m4.py", "m8.py", "m6.py"):  # what pkg*/sub0 names, outside
        (outside / "sub0" / name).write_text("canary\n")
    (root / "pkg2").rename(tmp_path / "moved")  # pkg2 is now a link to the canaries' parent
    (root / "pkg2").symlink_to(outside, target_is_directory=True)
    (root / "top0.txt").unlink()
    (root / "top0.txt").symlink_to(outside / "sub0" / "m2.py")
    (root / "top5.txt").unlink()
    os.mkfifo(root / "top5.txt")  # opened without blocking, then refused: not a file

    found = {path: data for path, data, _ in read_listed(root, listed, 100)}

    gone = {p for p in listed if p.startswith("pkg2/")} | {"top0.txt", "top5.txt"}
    assert {p for p, data in found.items() if data is None} == gone
    assert not any(data and b"canary" in data for data in found.values())
    assert found["pkg1/sub1/m1.py"] == b"line of 1\n" * 2
