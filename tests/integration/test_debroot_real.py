"""A real private root (builds/debroot.py): sid's mysql-server-core 9.7 and its whole closure,
libc6 included, resolved with a private apt index, unpacked into this module's tmp cache and run
through the root's own loader on Debian 12: `mysqld --version`, `--initialize-insecure`, a
server on a unix socket that Debian 12's `mariadb` client reaches (root's caching_sha2_password,
empty after --initialize-insecure), a clean shutdown. The system's apt state and installed
packages are the same before and after. Needs http://deb.debian.org/debian (about 70 MB, once
per run of this module, in its own tmp cache); 12-14 s in all here, the root 6 s of it."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from perflab.errors import EXIT_ENVIRONMENT, EXIT_USAGE, PerflabError
from perflab.builds import aptindex as A
from perflab.builds import debroot as D
from perflab.places.proc import Child, clean_env

# what apt and dpkg keep of this machine: a private root must change none of it
SYSTEM_APT = (
    Path("/etc/apt"),
    Path("/var/lib/apt"),
    Path("/var/cache/apt"),
    Path("/var/log/apt"),
    Path("/var/lib/dpkg"),
)
MYSQLD = "usr/sbin/mysqld"


def system_apt_state() -> dict[str, str]:
    """path -> size, mtime and (for files under 64 MiB) sha256 of everything under SYSTEM_APT,
    and the installed packages with their versions and states."""
    state = {}
    for top in SYSTEM_APT:
        for directory, _, files in os.walk(top):
            for name in [".", *files]:
                path = Path(directory, name)
                info = path.lstat()
                digest = ""
                if path.is_file() and not path.is_symlink() and info.st_size < 64 << 20 and os.access(path, os.R_OK):
                    digest = hashlib.sha256(path.read_bytes()).hexdigest()
                state[str(path)] = f"{info.st_size} {info.st_mtime_ns} {digest}"
    listing = subprocess.run(
        ["dpkg-query", "-W", "-f=${Package} ${Version} ${Status}\n"], capture_output=True, text=True, check=True
    )
    state["installed"] = listing.stdout
    return state


@pytest.fixture(scope="module")
def before() -> dict[str, str]:
    return system_apt_state()


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("debroot-cache")


@pytest.fixture(scope="module")
def root(before: dict[str, str], cache: Path) -> D.Root:
    started = time.monotonic()
    made = D.make_root("mysql-server-core", "sid", cache)
    print(f"cold set-up {time.monotonic() - started:.1f} s")  # shown with -s; docs/builds.md has the figures
    return made


def test_the_closure_holds_sids_libc_and_mysqld_runs_through_the_roots_loader(root: D.Root, cache: Path):
    assert root.suite == "sid" and root.packages["mysql-server-core"].startswith("9.7.")
    assert "libc6" in root.packages and "libstdc++6" in root.packages
    assert tuple(map(int, root.glibc_version.split("."))) >= (2, 38) > (2, 36)  # newer than Debian 12's
    assert root.loader.is_relative_to(root.dir) and not root.loader.is_symlink()
    assert root.foreign_libraries(MYSQLD) == []  # every library it maps is the root's
    out = subprocess.run(
        root.argv(MYSQLD, ["--version"]), check=False, capture_output=True, text=True, timeout=60, env=clean_env()
    )
    assert out.returncode == 0, out.stderr
    assert " Ver 9.7." in out.stdout, out.stdout
    direct = subprocess.run(
        [str(root.dir / MYSQLD), "--version"], check=False, capture_output=True, text=True, timeout=60
    )
    assert direct.returncode != 0  # through Debian 12's own loader it cannot start
    manifest = (root.dir.parent / D.MANIFEST).read_text(encoding="utf-8")
    assert f'"key": "{root.key}"' in manifest and '"format": 1' in manifest and '"glibc_version": "2.' in manifest


def test_a_second_request_is_served_from_the_cache(root: D.Root, cache: Path):
    started = time.monotonic()
    again = D.make_root("mysql-server-core", "sid", cache)
    cached_s = time.monotonic() - started
    pinned = D.make_root(f"mysql-server-core={root.packages['mysql-server-core']}", "sid", cache)
    assert again == root == pinned  # the same closure: the same key, whatever the request's form
    assert cached_s < 1.0, f"a cached root took {cached_s:.2f} s"
    assert sorted(p.name for p in (cache / "debroot" / "roots").iterdir()) == [root.key]


def test_bad_requests_say_what_the_suite_has(root: D.Root, cache: Path):
    have = D.versions("mysql-server-core", "sid", cache)
    assert have == [root.packages["mysql-server-core"]]
    with pytest.raises(PerflabError) as lacking:
        D.make_root("mysql-server-core=9.7.0-1", "sid", cache)
    assert lacking.value.exit_code == EXIT_USAGE
    assert lacking.value.message == f"sid has no mysql-server-core=9.7.0-1; it has {have[0]}"
    with pytest.raises(PerflabError) as unknown:
        D.make_root("mysql-server-core", "stretch", cache)
    assert unknown.value.exit_code == EXIT_USAGE and "bookworm, bookworm-backports, trixie, sid" in unknown.value.hint
    with pytest.raises(PerflabError) as conflict:  # each conflicts with the other: apt cannot resolve both
        D.make_root("mysql-server-core", "sid", cache, extra=("mariadb-server-core",))
    assert conflict.value.exit_code == EXIT_ENVIRONMENT
    assert (
        "unmet dependencies of" in conflict.value.message and "Conflicts: mariadb-server-core" in conflict.value.message
    )


def test_a_suite_whose_release_file_does_not_verify_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # bullseye's release key signs none of today's suites: sid's InRelease cannot verify against it
    monkeypatch.setattr(A, "KEYRING", Path("/usr/share/keyrings/debian-archive-bullseye-stable.gpg"))
    with pytest.raises(PerflabError) as refused:
        D.make_root("mysql-server-core", "sid", tmp_path)
    assert refused.value.exit_code == EXIT_ENVIRONMENT
    assert "NO_PUBKEY" in refused.value.message and "never skips the check" in refused.value.hint
    assert not (tmp_path / "debroot" / "roots").exists()


@pytest.fixture
def rundir() -> Iterator[Path]:
    """A short directory: a unix socket's path must stay under 108 bytes."""
    path = Path(tempfile.mkdtemp(prefix="plroot-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def mysqld_args(root: D.Root, run: Path) -> list[str]:
    share = root.dir / "usr" / "share" / "mysql"
    return [
        "--no-defaults",  # never /etc/mysql: the system's MariaDB configuration
        f"--basedir={root.dir / 'usr'}",
        f"--datadir={run / 'data'}",
        f"--lc-messages-dir={share}",
        f"--character-sets-dir={share / 'charsets'}",
        f"--plugin-dir={root.dir / 'usr' / 'lib' / 'mysql' / 'plugin'}",
        f"--tmpdir={run}",
        f"--secure-file-priv={run}",
        f"--log-error={run / 'error.log'}",
        "--user=root",
        "--innodb-buffer-pool-size=64M",
    ]


def log_tail(run: Path) -> str:
    log = run / "error.log"
    return "\n".join(log.read_text(errors="replace").splitlines()[-15:]) if log.is_file() else "(no error log)"


def client(run: Path, query: str) -> subprocess.CompletedProcess[str]:
    argv = ["mariadb", "--no-defaults", f"--socket={run / 'mysqld.sock'}", "-uroot", "--batch", "--skip-column-names"]
    return subprocess.run([*argv, "-e", query], check=False, capture_output=True, text=True, timeout=30)


def test_mysql_97_initializes_serves_debian_12s_client_and_shuts_down(root: D.Root, rundir: Path):
    init = subprocess.run(
        root.argv(MYSQLD, [*mysqld_args(root, rundir), "--initialize-insecure"]),
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        env=clean_env(),
    )
    assert init.returncode == 0, f"--initialize-insecure exited {init.returncode}:\n{log_tail(rundir)}"
    argv = root.argv(MYSQLD, [*mysqld_args(root, rundir), f"--socket={rundir / 'mysqld.sock'}", "--skip-networking",
                              "--mysqlx=OFF", f"--pid-file={rundir / 'mysqld.pid'}"])  # fmt: skip
    with Child(argv, env=clean_env()) as server:
        try:
            deadline = time.monotonic() + 120
            while (answer := client(rundir, "select version()")).returncode != 0:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"mysqld did not serve ({server.poll()=}):\n{answer.stderr}\n{log_tail(rundir)}")
                time.sleep(0.5)
            assert answer.stdout.strip().startswith("9.7."), answer.stdout  # Debian's build says "9.7.4-2"
            plugin = client(rundir, "select plugin from mysql.user where user = 'root' and host = 'localhost'")
            assert plugin.stdout.strip() == "caching_sha2_password", plugin
            maps = Path(f"/proc/{server.pid}/maps").read_text()
            libc = {line.split()[-1] for line in maps.splitlines() if "/libc.so.6" in line}
            assert str(root.loader) in maps and libc == {str(root.dir / "usr/lib/x86_64-linux-gnu/libc.so.6")}, libc
            assert server.terminate(grace=60) == 0, log_tail(rundir)  # SIGTERM: a clean shutdown
        finally:
            server.kill()
    assert _mysqlds(rundir) == []  # no orphan: Child killed its process group


def _mysqlds(rundir: Path) -> list[int]:
    """Live processes whose command line names `rundir`."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if str(rundir).encode() in cmdline:
            found.append(int(entry))
    return found


def test_the_systems_apt_state_and_packages_are_unchanged(root: D.Root, cache: Path, before: dict[str, str]):
    D.make_root("mysql-server-core", "sid", cache)
    D.versions("mysql-server-core", "sid", cache)
    after = system_apt_state()
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert changed == [], changed
