"""The machine lock and a results directory's writer lock against another account (issue 48): a
symlink planted where a lock goes truncates nothing, nobody else can hold the machine lock, a lock
directory or file someone else owns is refused with a clear error, and a second writer of a results
directory is refused at once, naming the first (perflab/lockfile.py, run/lock.py, store/writer_lock.py)."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from perflab.errors import EXIT_ENVIRONMENT, ConcurrentRunError, UnsafePathError
from perflab.run import lock
from perflab.run.lock import MachineLock
from perflab.store.writer_lock import WriterLock
from tests.nobody import NOBODY, as_nobody, shared_dir, start_as_nobody

PLANT_SYMLINK = "import os, sys; os.symlink(sys.argv[1], sys.argv[2])"
# hold the flock of a lock file if this account can open it at all (read-only is enough for flock)
HOLD = """
import fcntl, os, sys, time
try:
    fd = os.open(sys.argv[1], os.O_RDONLY | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("ready", flush=True); print("held", flush=True)
except OSError as exc:
    print("ready", flush=True); print("refused", exc.strerror, flush=True)
time.sleep(60)
"""


@pytest.fixture
def shared():
    path = shared_dir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def victim(tmp_path: Path) -> Path:
    path = tmp_path / "precious"
    path.write_text("root's data\n", encoding="ascii")
    return path


def test_a_symlink_planted_at_the_machine_lock_truncates_nothing(tmp_path: Path, shared: Path):
    target = victim(tmp_path)
    assert as_nobody(PLANT_SYMLINK, str(target), str(shared / "perflab.lock")).returncode == 0
    with pytest.raises(UnsafePathError) as refused:
        MachineLock(tmp_path, path=shared / "perflab.lock").__enter__()
    assert "writable by other accounts" in refused.value.message and refused.value.exit_code == EXIT_ENVIRONMENT
    assert target.read_text(encoding="ascii") == "root's data\n"


def test_another_account_cannot_hold_the_machine_lock(tmp_path: Path):
    """Not the default lock's file (in root's /run), nor one in a directory like /run (root's,
    0755): the directory perflab makes for it is 0700, the file 0600. (The default lock itself is
    not taken here: a real run on this machine may hold it.)"""
    lock.LOCK_PATH.parent.mkdir(mode=0o700, exist_ok=True)  # what the first run makes
    run_like = Path(tempfile.mkdtemp(prefix="plrun-", dir="/tmp"))
    run_like.chmod(0o755)
    attackers = [start_as_nobody(HOLD, str(lock.LOCK_PATH))]
    try:
        with MachineLock(tmp_path, path=run_like / "perflab" / "perflab.lock") as held:
            attackers.append(start_as_nobody(HOLD, str(held.path)))
            st = os.stat(held.path.parent)
            assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (os.geteuid(), 0o700)
            assert stat.S_IMODE(os.stat(held.path).st_mode) == 0o600
        for attacker in attackers:
            assert attacker.stdout is not None and attacker.stdout.readline().startswith("refused")
        st = os.stat(lock.LOCK_PATH.parent)
        assert lock.LOCK_PATH.parent == Path("/run/perflab") and st.st_uid == 0 and st.st_mode & 0o077 == 0
    finally:
        for attacker in attackers:
            attacker.kill()
            attacker.communicate()
        shutil.rmtree(run_like)


def test_a_second_run_is_told_whom_it_waits_for(tmp_path: Path):
    path = tmp_path / "locks" / "perflab.lock"
    with MachineLock(tmp_path / "first", path=path):
        with pytest.raises(ConcurrentRunError) as refused:
            MachineLock(tmp_path / "second", path=path).__enter__()
    assert f"pid {os.getpid()}, results {tmp_path / 'first'}, since 20" in refused.value.message
    assert "--allow-concurrent" in (refused.value.hint or "")
    with MachineLock(tmp_path / "third", path=path):  # released on exit
        pass


@pytest.mark.parametrize("how", ["another account's", "group-writable", "a symlink"])
def test_a_lock_directory_perflab_cannot_trust_is_refused(tmp_path: Path, shared: Path, how: str):
    where = shared / "locks"
    if how == "another account's":
        assert as_nobody("import os, sys; os.mkdir(sys.argv[1], 0o700)", str(where)).returncode == 0
    elif how == "group-writable":
        where.mkdir(mode=0o700)
        where.chmod(0o770)
    else:
        (tmp_path / "elsewhere").mkdir(mode=0o700)
        where.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UnsafePathError) as refused:
        MachineLock(tmp_path, path=where / "perflab.lock").__enter__()
    expected = {"another account's": f"owned by uid {NOBODY}", "group-writable": "mode 0770", "a symlink": "symbolic"}
    assert expected[how] in refused.value.message and str(where) in refused.value.message
    assert not (tmp_path / "elsewhere" / "perflab.lock").exists()


def test_a_lock_file_of_another_account_is_refused(tmp_path: Path):
    locks = tmp_path / "locks"
    locks.mkdir(mode=0o700)
    (locks / "perflab.lock").touch()
    os.chown(locks / "perflab.lock", NOBODY, NOBODY)
    with pytest.raises(UnsafePathError, match="not a lock file of this perflab's"):
        MachineLock(tmp_path, path=locks / "perflab.lock").__enter__()


def test_without_root_the_lock_is_this_accounts_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Where the lock's directory cannot be made (/run is root's), the account's own one is used."""
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    with MachineLock(tmp_path, path=tmp_path / "missing" / "parent" / "perflab.lock") as held:
        assert held.path == runtime / "perflab" / "perflab.lock" and held.path.is_file()


def test_a_second_writer_of_a_results_directory_is_refused_at_once(tmp_path: Path):
    with WriterLock(tmp_path / "results"):
        with pytest.raises(ConcurrentRunError) as refused:
            WriterLock(tmp_path / "results").__enter__()
    assert refused.value.exit_code == EXIT_ENVIRONMENT
    assert f"{tmp_path / 'results'} is being written by another perflab: pid {os.getpid()}, since 20" in (
        refused.value.message
    )
    with WriterLock(tmp_path / "results"):  # the next writer, once the first is done
        pass


def test_a_symlink_planted_at_a_writer_lock_truncates_nothing(tmp_path: Path, shared: Path):
    target = victim(tmp_path)
    assert as_nobody(PLANT_SYMLINK, str(target), str(shared / "writer.lock")).returncode == 0
    with pytest.raises(UnsafePathError, match="symbolic link"):
        WriterLock(shared).__enter__()
    assert target.read_text(encoding="ascii") == "root's data\n"
