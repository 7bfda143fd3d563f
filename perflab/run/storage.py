"""Where a run's datadirs live: tmpfs (the default) or a directory on disk, and what that is.

`[experiment] storage = "tmpfs"` puts the work directory on the tmpfs (run/workdir.py); a path
puts it in that directory, where perflab creates one `perflab-XXXX` directory and removes only
that one (and those of its own killed runs). What the storage is comes from the kernel:
/proc/self/mountinfo (the mount holding the path: device, filesystem, mount options) and sysfs
(the block device's I/O scheduler, its name in /proc/diskstats).

    storage = describe(Path("/var/tmp/lab"))
    storage.record() -> {"path": "/var/tmp/lab", "on_disk": true, "device": "/dev/vda", "fstype": "ext4",
                         "mount_point": "/", "mount_options": "rw,relatime,...", "scheduler": "mq-deadline",
                         "block_device": "vda", "dev": "254:0"}

A cell's copy of the snapshot is a reflink where the filesystem can share extents (FICLONE:
btrfs, xfs with reflink=1, bcachefs), else a byte copy; places/copy.py's `clone_file` says which it made.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from perflab.errors import EnvironmentProblem, Problem, ResourceError
from perflab.run import storage_dirs
from perflab.run.workdir import base_dir

MOUNTINFO = Path("/proc/self/mountinfo")
SYS_DEV_BLOCK = Path("/sys/dev/block")
DROP_CACHES = Path("/proc/sys/vm/drop_caches")
MEMORY_FS = {"tmpfs", "ramfs"}
# a unix socket's path holds 107 bytes; below the storage: /perflab-XXXXXXXX/prepare-dataset-mysql-8.0/
# .s.PGSQL.5432.lock, about 64 bytes
MAX_PATH_BYTES = 107 - 64


@dataclass(frozen=True)
class Mount:
    """One line of /proc/self/mountinfo."""

    dev: str  # "254:0"
    root: str
    mount_point: str
    options: str  # per-mount options, then the superblock's: "rw,relatime,discard"
    fstype: str
    source: str  # "/dev/vda", "tmpfs"


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as \\ooo octal."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 3 < len(field) and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> list[Mount]:
    """Every mount, in the kernel's order (a later mount on the same point hides an earlier one).
    `36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue`"""
    mounts = []
    for line in text.splitlines():
        fields = line.split(" ")
        if "-" not in fields[6:]:
            continue
        sep = fields.index("-", 6)
        if len(fields) < sep + 3:
            continue
        mount_options, fstype, source = fields[5], fields[sep + 1], _unescape(fields[sep + 2])
        super_options = fields[sep + 3] if len(fields) > sep + 3 else ""
        options = ",".join(dict.fromkeys(o for o in [*mount_options.split(","), *super_options.split(",")] if o))
        mounts.append(Mount(fields[2], _unescape(fields[3]), _unescape(fields[4]), options, fstype, source))
    return mounts


def mount_of(path: Path, mounts: list[Mount]) -> Mount:
    """The mount that holds `path` (resolved): the longest mount point above it, the last mounted."""
    target = str(path)
    best: Mount | None = None
    for mount in mounts:
        point = mount.mount_point.rstrip("/") or "/"
        inside = target == point or target.startswith(point if point == "/" else point + "/")
        if inside and (best is None or len(point) >= len(best.mount_point.rstrip("/") or "/")):
            best = mount
    if best is None:
        raise ValueError(f"no mount holds {path}")
    return best


def scheduler_of(text: str) -> str | None:
    """`none [mq-deadline] kyber bfq` -> "mq-deadline"; a device without a choice: its one word."""
    words = text.split()
    chosen = [w[1:-1] for w in words if w.startswith("[") and w.endswith("]")]
    return chosen[0] if chosen else (words[0] if len(words) == 1 else None)


def block_device(dev: str, sys_root: Path = SYS_DEV_BLOCK) -> tuple[str | None, str | None]:
    """(its name in /proc/diskstats, the I/O scheduler of its disk) for a major:minor; a partition's
    scheduler is its disk's (the partition's sysfs directory lies inside the disk's)."""
    node = sys_root / dev
    if dev.startswith("0:") or not node.exists():
        return None, None
    real = node.resolve()
    for where in (real, real.parent):
        queue = where / "queue" / "scheduler"
        if queue.is_file():
            return real.name, scheduler_of(queue.read_text(encoding="ascii"))
    return real.name, None


@dataclass(frozen=True)
class Storage:
    """What a run's datadirs live on (the record stored in the run's meta `storage`)."""

    path: str  # the directory perflab makes its work directory in
    on_disk: bool  # false: a memory filesystem (tmpfs, ramfs)
    device: str  # the mount's source: "/dev/vda", "tmpfs"
    fstype: str
    mount_point: str
    mount_options: str
    dev: str  # major:minor, the line of /proc/diskstats
    block_device: str | None  # its name in /proc/diskstats ("vda"); None on tmpfs
    scheduler: str | None

    def record(self) -> dict[str, object]:
        return asdict(self)


def describe(path: Path, mountinfo: Path = MOUNTINFO, sys_root: Path = SYS_DEV_BLOCK) -> Storage:
    """What `path` (an existing directory) is stored on."""
    mount = mount_of(path.resolve(), parse_mountinfo(mountinfo.read_text(encoding="utf-8", errors="replace")))
    name, scheduler = block_device(mount.dev, sys_root)
    on_disk = mount.fstype not in MEMORY_FS
    return Storage(
        str(path), on_disk, mount.source, mount.fstype, mount.mount_point, mount.options, mount.dev, name, scheduler
    )


# on a host ($0: major:minor): the block device's name in /proc/diskstats, then its disk's I/O scheduler
_BLOCK_ON_HOST = (
    'd=$(readlink -f "/sys/dev/block/$0") && [ -e "$d" ] || exit 1; echo "${d##*/}"; '
    'cat "$d/queue/scheduler" 2>/dev/null || cat "${d%/*}/queue/scheduler" 2>/dev/null || true'
)


def describe_on(link: Any, path: str) -> Storage:
    """What `path` (an existing directory on the host `link` reaches) is stored on, read there as
    `describe` reads this machine: the host's mountinfo and sysfs."""
    real = link.run(["readlink", "-f", path]).stdout.strip() or path
    mount = mount_of(Path(real), parse_mountinfo(link.run(["cat", "/proc/self/mountinfo"]).stdout))
    name = scheduler = None
    if not mount.dev.startswith("0:"):
        found = link.run(["sh", "-c", _BLOCK_ON_HOST, mount.dev])
        lines = found.stdout.splitlines() if found.status == 0 else []
        name = lines[0].strip() if lines else None
        scheduler = scheduler_of(lines[1]) if len(lines) > 1 else None
    on_disk = mount.fstype not in MEMORY_FS
    return Storage(
        path, on_disk, mount.source, mount.fstype, mount.mount_point, mount.options, mount.dev, name, scheduler
    )


# on a host ($0: the storage path): why it cannot hold a run's directory, or nothing
_USABLE_ON_HOST = '[ -d "$0" ] || { echo "no such directory"; exit 1; }; [ -w "$0" ] && [ -x "$0" ] || { echo "not writable"; exit 1; }'


def host_problems(link: Any, name: str, storage: str, drop: bool) -> list[Problem]:
    """`[experiment] storage` (a directory there) and `drop_caches` on a server host (exit 3): as
    directory_problems and drop_caches_problems ask of this machine (no length limit: the sockets stay
    in the run directory on the host's tmpfs, only the datadirs go there)."""
    problems = []
    if storage != "tmpfs":
        said = link.run(["sh", "-c", _USABLE_ON_HOST, storage])
        if said.status != 0:
            problems.append(
                Problem(
                    "experiment.storage",
                    f"an existing directory perflab can write in on host {name}",
                    f"{storage}: {said.stdout.strip() or said.stderr.strip()}",
                    f"mkdir -p {storage} on host {name}",
                )
            )
    if drop and link.run(["test", "-w", str(DROP_CACHES)]).status != 0:
        problems.append(
            Problem(
                "experiment.drop_caches",
                f"a writable {DROP_CACHES} on host {name} (root there)",
                "not writable",
                'connect as root (ssh = "root@..."), or set drop_caches = false',
            )
        )
    return problems


def drop_caches_on(link: Any, name: str) -> float:
    """drop_caches on a server host: sync, then drop its page cache; seconds it took (ResourceError)."""
    start = time.monotonic()
    done = link.run(["sh", "-c", f"sync && echo 3 > {DROP_CACHES}"], timeout=600)
    if done.status != 0:
        raise ResourceError(
            f"host {name}: cannot drop the page cache: {done.stderr.strip()[-300:]}",
            "connect as root there, or set [experiment] drop_caches = false",
        )
    return round(time.monotonic() - start, 3)


def directory_problems(path: Path) -> list[Problem]:
    """`[experiment] storage` must name an existing directory perflab may write in (the machine's
    problem, exit 3: the file may be right for another machine)."""
    where = "experiment.storage"
    if not path.is_dir():
        found = "not a directory" if path.exists() else "no such directory"
        return [Problem(where, "an existing directory", f"{path}: {found}", f"mkdir -p {path}")]
    if not os.access(path, os.W_OK | os.X_OK):
        return [Problem(where, "a directory perflab can write in", f"{path}: not writable", f"chmod u+wx {path}")]
    if len(str(path).encode()) > MAX_PATH_BYTES:
        return [
            Problem(
                where,
                f"a path of at most {MAX_PATH_BYTES} bytes",
                f"{path}: {len(str(path).encode())} bytes",
                "the servers' sockets live below it, and a unix socket's path holds 107 bytes at most: "
                "use a shorter path, or a short symlink to this one",
            )
        ]
    return []


def problems(
    storage: str, drop: bool, need: Callable[[], int], kinds: Callable[[Path], list[Problem]]
) -> list[Problem]:
    """What this machine has against `[experiment] storage` and `drop_caches` (exit 3): a directory
    perflab can write in with room for `need()` bytes (the snapshot and a cell's copy), that the
    server can use (`kinds`: its kind's storage_problems)."""
    found = drop_caches_problems(drop)
    if storage == "tmpfs":
        return found
    path = Path(storage)
    mine = directory_problems(path) or room_problems(describe(path), need(), 1)
    return found + (mine or kinds(path))


def base(storage: str) -> Path:
    """The directory a run's work directory is made in: the tmpfs, or the storage path."""
    return base_dir() if storage == "tmpfs" else Path(storage)


def of_experiment(storage: str, source: str = "(experiment)") -> Storage:
    """The described storage of an experiment's `[experiment] storage` (exit 3 naming the path
    when it is missing or not writable)."""
    path = base(storage)
    problems = directory_problems(path)
    if problems:
        raise EnvironmentProblem(source, problems)
    if storage != "tmpfs":
        storage_dirs.remember(path)  # where doctor --clean looks for killed runs' datadirs on disk
    return describe(path)


def room_problems(storage: Storage, need: int, copies: int) -> list[Problem]:
    """The dataset's snapshot and `copies` copies of it must fit on the storage."""
    free = shutil.disk_usage(storage.path).free
    if free >= need:
        return []
    where = "experiment.storage" if storage.on_disk else f"(machine) {storage.path}"
    return [
        Problem(
            where,
            f"about {need >> 20} MiB free on {storage.path} (the dataset's snapshot and {copies} cell cop"
            + ("y" if copies == 1 else "ies")
            + " of it)",
            f"{free >> 20} MiB free ({storage.fstype} on {storage.device})",
            "free space there, use a smaller dataset, or point [experiment] storage at a larger filesystem",
        )
    ]


def drop_caches() -> None:
    """Write back every dirty page (sync), then drop the page cache, dentries and inodes of the
    whole machine (/proc/sys/vm/drop_caches = 3): every process on it loses its cache, not only ours."""
    os.sync()
    try:
        DROP_CACHES.write_text("3\n", encoding="ascii")
    except OSError as exc:
        raise ResourceError(
            f"cannot drop the page cache ({DROP_CACHES}: {exc.strerror})",
            "run perflab as root, or set [experiment] drop_caches = false",
        ) from None


def drop_caches_problems(wanted: bool) -> list[Problem]:
    """drop_caches = true needs /proc/sys/vm/drop_caches writable (root)."""
    if not wanted or os.access(DROP_CACHES, os.W_OK):
        return []
    return [
        Problem(
            "experiment.drop_caches",
            f"a writable {DROP_CACHES} (root)",
            "not writable",
            "run perflab as root, or set drop_caches = false",
        )
    ]


def drop_caches_s(wanted: bool) -> float | None:
    """[experiment] drop_caches: sync and drop the page cache now; seconds it took (None: off)."""
    if not wanted:
        return None
    start = time.monotonic()
    drop_caches()
    return round(time.monotonic() - start, 3)
