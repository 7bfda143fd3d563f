"""What a build runs from on a server host (hosts/trees.py): its private root and its own tree, each
copied once, its paths there; the installed kind runs the host's own binary through a root copied there."""

from __future__ import annotations

from pathlib import Path

from perflab.builds import Build, launcher
import pytest

from perflab.errors import PerflabError
from perflab.hosts.trees import own_trees, shipped

ROOT = {"dir": "/cache/debroot/roots/abc", "loader": "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
        "library_path": ["usr/lib/x86_64-linux-gnu"], "suite": "sid", "key": "abc", "glibc_version": "2.43"}  # fmt: skip


def build(kind: str, binary: str, share: str | None = None, root: dict | None = None) -> Build:
    extra, shared = ({"root": root} if root else {}), Path(share) if share else None
    return Build("b", kind, Path(binary), "11.8.3-MariaDB-1", "f" * 64, None, shared, None, extra)


class Put:
    """The host side: a local directory -> its copy there, counting the copies."""

    def __init__(self) -> None:
        self.copied: list[Path] = []

    def __call__(self, local: Path) -> str:
        self.copied.append(local)
        return f"/dev/shm/perflab-host-x/tree-{len(self.copied) - 1}"


def test_a_sid_package_runs_from_its_root_copied_there() -> None:
    put = Put()
    local = build("package", f"{ROOT['dir']}/usr/sbin/mariadbd", f"{ROOT['dir']}/usr/share/mariadb", ROOT)
    there = shipped(local, put, "/usr/sbin/mariadbd")
    assert put.copied == [Path(ROOT["dir"])]  # the binary and its share are in the root: one copy
    assert there.binary == Path("/dev/shm/perflab-host-x/tree-0/usr/sbin/mariadbd")
    assert there.share == Path("/dev/shm/perflab-host-x/tree-0/usr/share/mariadb")
    assert there.launcher[0] == "/dev/shm/perflab-host-x/tree-0/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
    assert there.launcher[-1] == "/dev/shm/perflab-host-x/tree-0/usr/lib/x86_64-linux-gnu"
    assert launcher(local.extra["root"])[0].startswith(ROOT["dir"])  # the local build is left as it was
    assert there.record()["shipped_from"] == str(local.binary) and there.sha256 == local.sha256


def test_a_glibc_variant_runs_the_hosts_own_server_through_the_root() -> None:
    put = Put()
    there = shipped(build("installed", "/usr/sbin/mariadbd", None, ROOT), put, "/usr/local/sbin/mariadbd")
    assert put.copied == [Path(ROOT["dir"])] and there.binary == Path("/usr/local/sbin/mariadbd")
    assert there.launcher[0].startswith("/dev/shm/perflab-host-x/tree-0/") and "shipped_from" not in there.extra


def test_a_basedir_or_source_build_copies_its_install_tree() -> None:
    put = Put()
    there = shipped(build("source", "/cache/source/k/install/bin/mariadbd", "/cache/source/k/install/share"), put, "")
    assert put.copied == [Path("/cache/source/k/install")] and there.launcher == []
    assert there.binary == Path("/dev/shm/perflab-host-x/tree-0/bin/mariadbd")
    assert there.share == Path("/dev/shm/perflab-host-x/tree-0/share")
    # a share directory apart from the tree (Debian's layout) goes as a tree of its own
    debian = build("basedir", "/srv/pg/lib/postgresql/15/bin/postgres", "/srv/pg/share/postgresql/15")
    assert own_trees(debian) == [Path("/srv/pg/lib/postgresql/15"), Path("/srv/pg/share/postgresql/15")]
    put = Put()
    there = shipped(debian, put, "")
    assert there.share == Path("/dev/shm/perflab-host-x/tree-1") and len(put.copied) == 2
    # the system's own tree is never copied
    with pytest.raises(PerflabError, match="a directory of the system's"):
        own_trees(build("basedir", "/usr/sbin/mariadbd", "/usr/share/mysql"))


def test_a_tree_that_cannot_be_packed_here_is_perflabs_error(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from perflab.hosts.trees import put_tree

    with pytest.raises(PerflabError, match="packing .*missing for host db failed"):
        link = SimpleNamespace(name="db", target="root@db", run=lambda argv: SimpleNamespace(status=0))
        put_tree(link, tmp_path / "missing", "/dev/shm/h/tree-0", tmp_path)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []  # no half-written tar left


@pytest.mark.parametrize("has_zstd", [True, False])
def test_a_tree_goes_through_zstd_where_the_host_has_it_else_gzip(tmp_path: Path, has_zstd: bool) -> None:
    """The compressor both ends run, and the host's unpacking of it (run here: `sh -c _UNPACK`)."""
    import subprocess
    from types import SimpleNamespace

    from perflab.hosts import trees

    asked: list[list[str]] = []

    def run(argv: list[str]) -> SimpleNamespace:
        asked.append(argv)
        return SimpleNamespace(status=0 if has_zstd else 1)

    link = SimpleNamespace(name="db", target=f"root@db-{has_zstd}", run=run)
    suffix, program, unpack = trees.compressor(link)  # type: ignore[arg-type]
    assert (suffix, program, unpack) == (trees.ZSTD if has_zstd else trees.GZIP) and len(asked) == 1
    again = trees.compressor(link)  # type: ignore[arg-type]
    assert again == (suffix, program, unpack) and len(asked) == 1  # asked once per host
    (tmp_path / "tree" / "bin").mkdir(parents=True)
    (tmp_path / "tree" / "bin" / "server").write_bytes(b"\x7fELF" + bytes(1 << 20))
    there = tmp_path / "there" / "tree-0"
    there.parent.mkdir()
    tar = f"{there}.tar.{suffix}"
    subprocess.run(["tar", "--sparse", "-I", program, "-cf", tar, "-C", str(tmp_path / "tree"), "."], check=True)
    subprocess.run(["sh", "-c", trees._UNPACK, str(there), unpack, suffix], check=True)
    assert (there / "bin" / "server").read_bytes() == (tmp_path / "tree" / "bin" / "server").read_bytes()
    assert oct(there.stat().st_mode & 0o777) == "0o755" and not Path(tar).exists()
