"""A local source tree's fingerprint (builds/fetch.local): it decides the build's cache key,
so any change to what the build reads must change it, and a git that fails must not pass for a
clean tree (a stale cached build would be measured as the new one)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from perflab.errors import PerflabError
from perflab.builds.fetch import local


def git(tree: Path, *args: str) -> None:
    argv = ["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@example.org", *args]
    subprocess.run(argv, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    tree = tmp_path / "src"
    tree.mkdir()
    git(tree, "init", "-q")
    (tree / "CMakeLists.txt").write_text("project(x C)\n")
    (tree / "blob.bin").write_bytes(b"\x00\x01\x02" * 10)
    git(tree, "add", ".")
    git(tree, "commit", "-q", "-m", "first")
    return tree


def fingerprint(tree: Path, cache: Path) -> str:
    return local(tree, cache).fingerprint


def test_an_untracked_files_contents_change_the_key(repo: Path, tmp_path: Path):
    clean = fingerprint(repo, tmp_path / "cache")
    (repo / "extra.c").write_text("int x = 1;\n")
    added = fingerprint(repo, tmp_path / "cache")
    (repo / "extra.c").write_text("int x = 2;\n")  # same name, same size: only its contents differ
    edited = fingerprint(repo, tmp_path / "cache")
    assert len({clean, added, edited}) == 3
    (repo / "extra.c").write_text("int x = 1;\n")
    assert fingerprint(repo, tmp_path / "cache") == added  # the same contents: the same key


def test_a_changed_binary_file_changes_the_key(repo: Path, tmp_path: Path):
    """A binary file's change is in the key too (`git diff --binary`: its contents, not "Binary files differ")."""
    (repo / "blob.bin").write_bytes(b"\x00\x01\x03" * 10)
    first = fingerprint(repo, tmp_path / "cache")
    (repo / "blob.bin").write_bytes(b"\x00\x01\x04" * 10)
    assert fingerprint(repo, tmp_path / "cache") != first


def test_a_git_diff_that_fails_is_an_error_not_a_clean_tree(repo: Path, tmp_path: Path):
    (repo / ".git" / "index").write_bytes(b"garbage")  # HEAD still resolves; `git diff HEAD` exits 128
    with pytest.raises(PerflabError) as caught:
        fingerprint(repo, tmp_path / "cache")
    assert "git -C" in caught.value.message and "diff" in caught.value.message
    assert "exited 128" in caught.value.message and "index" in caught.value.message
    assert caught.value.hint and "git status" in caught.value.hint


def test_a_tree_without_git_is_fingerprinted_by_its_files(tmp_path: Path):
    tree = tmp_path / "plain"
    tree.mkdir()
    (tree / "a.c").write_text("int a;\n")
    before = fingerprint(tree, tmp_path / "cache")
    (tree / "a.c").write_text("int ab;\n")
    assert fingerprint(tree, tmp_path / "cache") != before
