"""places.proc.per_binary: a binary's answer (its --version) asked once a process while the file is
the same, asked again once it changed, and never kept for a file that is not there."""

from __future__ import annotations

import os
from pathlib import Path

from perflab.places.proc import per_binary


def test_asked_once_while_the_file_is_the_same_and_again_once_it_changed(tmp_path: Path) -> None:
    binary = tmp_path / "mariadbd"
    binary.write_bytes(b"v1")
    asked: list[str] = []

    def ask() -> str:
        asked.append(binary.read_text())
        return binary.read_text()

    assert [per_binary([binary], ("version",), ask) for _ in range(3)] == ["v1"] * 3
    assert asked == ["v1"]
    assert per_binary([binary], ("another question",), ask) == "v1" and len(asked) == 2  # its own answer
    binary.write_bytes(b"v2")  # an upgrade in place: a new mtime, here also a new size
    os.utime(binary, ns=(1, 2))
    assert per_binary([binary], ("version",), ask) == "v2" and asked == ["v1", "v1", "v2"]


def test_a_missing_file_is_asked_every_time_and_an_error_is_not_kept(tmp_path: Path) -> None:
    calls = []

    def ask() -> int:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("failed once")
        return len(calls)

    missing = tmp_path / "gone"
    assert per_binary([missing], ("v",), ask) == 1
    binary = tmp_path / "here"
    binary.write_bytes(b"x")
    try:
        per_binary([binary], ("v",), ask)
    except RuntimeError:
        pass
    assert per_binary([binary], ("v",), ask) == 3 and per_binary([binary], ("v",), ask) == 3
