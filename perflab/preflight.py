"""Checks of an experiment against this machine, before anything starts.

The spec parser checks the file on its own; this adds what needs the machine: tools,
installed allocator libraries, the sysbench test and its option names, CPUs for pinning.
All problems come back together so `perflab run` reports them at once (exit 2).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perflab import allocators, elf, servers
from perflab.concurrency import concurrency_problems
from perflab.errors import EnvironmentProblem, Problem, SpecError
from perflab import workloads
from perflab.run import storage
from perflab.observers.checks import profiler_problems
from perflab.places.proc import which
from perflab.run.workdir import TMPFS
from perflab.spec.matrix import Experiment
from perflab.spec.hosts import client_hosts, preloads_by_host, server_here, server_hosts


def check(exp: Experiment, binaries: Callable[[Experiment], dict[str | None, Any]] | None = None) -> None:
    """Raise SpecError with every problem this machine has with `exp`. `binaries`: what finds the
    server binaries its cells run that are here (builds/resolve.py `available`: build name -> Build,
    None: the installed server), whose option names are checked once the tools are known to be
    here; None: no option names are checked."""
    kind = servers.kind(exp.file.experiment.server)
    workload = workloads.of(exp.file)
    tools = kind.tool_problems() + workload.tool_problems()
    machine = tools + _allocators(exp) + profiler_problems(exp.file.observe) + _builds(exp) + concurrency_problems(exp)
    if exp.file.experiment.pin and len(os.sched_getaffinity(0)) < 2:
        machine.append(
            Problem("experiment.pin", "at least 2 CPUs", f"{len(os.sched_getaffinity(0))}", "set pin = false")
        )
    e = exp.file.experiment
    if server_here(exp.file):  # on a server host they are looked at there
        machine += storage.problems(
            e.storage, e.drop_caches, lambda: 2 * dataset_bytes(exp), kind.storage_problems
        )
    if e.storage == "tmpfs" and not os.path.isdir(TMPFS):
        machine.append(Problem("(machine)", f"a tmpfs at {TMPFS}", "none", "mount -t tmpfs tmpfs /dev/shm"))
    elif e.storage == "tmpfs":
        estimate = dataset_bytes(exp)
        need, free = 2 * estimate, shutil.disk_usage(TMPFS).free
        if free < need:
            key, smaller = workload.dataset_size
            machine.append(
                Problem(
                    f"{key} ({TMPFS})" if key else f"(machine) {TMPFS}",
                    f"about {need >> 20} MiB free (the dataset and one cell's copy of it)",
                    f"{free >> 20} MiB free",
                    f"free memory on the tmpfs, or use a smaller dataset ({smaller})",
                )
            )
    if client_hosts(exp.file) or server_hosts(exp.file):  # reachable, with its tools
        from perflab.hosts.preflight import host_problems  # (hosts/preflight.py)

        dirs = kind.server_dirs + workload.client_dirs  # the server host's tools, the client host's
        machine += host_problems(exp.file, workload.client_packages, kind.server_packages, dirs)
    if machine:  # exit code 3: the file may be fine, the machine is not
        raise EnvironmentProblem(exp.source, machine)
    problems = kind.spec_problems(exp)
    if binaries is not None:  # server option names, against each binary here that will run them
        from perflab.cache import cache_root

        problems += kind.option_problems(exp, binaries(exp), cache_root())
    problems += workload.spec_problems(exp)
    problems += _client_libraries(exp)
    problems += _glibc_too_old(exp)
    problems += kind.connection_problems(exp)
    if problems:
        raise SpecError(exp.source, problems)


# what a build from source needs besides the compiler (Makefile: make setup-builds)
BUILD_TOOLS = (("cmake", "cmake"), ("make", "make"), ("bison", "bison"), ("dpkg-source", "dpkg-dev"))


def _builds(exp: Experiment) -> list[Problem]:
    """Source builds: the toolchain, the build tools, a writable cache; PGO with gcc only."""
    from perflab.cache import cache_root

    problems = []
    used = {cell.build for cell in exp.cells()}
    sources = {n: b for n, b in exp.file.builds.items() if b.kind == "source" and n in used}
    for name, build in sources.items():
        family, version = build.compiler.split("-", 1)
        tools = [(f"gcc-{version}", f"gcc-{version}"), (f"g++-{version}", f"g++-{version}")]
        if family == "clang":
            tools = [(f"clang-{version}", f"clang-{version}"), (f"clang++-{version}", f"clang-{version}")]
        for tool, package in [*tools, *BUILD_TOOLS]:
            if which(tool) is None:
                problems.append(
                    Problem(
                        f"builds.{name}", f"{tool} to build from source", "not installed", f"apt-get install {package}"
                    )
                )
        if build.pgo and family != "gcc":
            problems.append(
                Problem(
                    f"builds.{name}.pgo", "a gcc build for PGO", build.compiler, "PGO with clang is not supported yet"
                )
            )
    glibcs = any(cell.glibc for cell in exp.cells())  # [variants] glibc: a private root too
    if sources or glibcs or any(exp.file.builds[n].kind == "package" for n in used if n):
        root = cache_root()
        probe = root if root.exists() else next((p for p in root.parents if p.exists()), root)
        if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
            problems.append(
                Problem("(machine) build cache", "a writable directory", str(root), "set PERFLAB_CACHE to one")
            )
    return problems


def _glibc_too_old(exp: Experiment) -> list[Problem]:
    """A basedir's server that needs a newer C library than this system's, run with the system's
    (no glibc variant): the loader would refuse it at start ("version `GLIBC_2.38' not found")."""
    from perflab.spec.builds import server_binary

    said = (os.confstr("CS_GNU_LIBC_VERSION") or "").removeprefix("glibc ")  # "glibc 2.36": this process's
    have = tuple(int(p) for p in said.split(".") if p.isdigit())
    problems = []
    for name in sorted({c.build for c in exp.cells() if c.glibc is None and c.build is not None}):
        basedir = exp.file.builds[name].basedir
        binary = server_binary(Path(basedir)) if basedir else None
        needed = elf.glibc_needed(binary) if binary is not None else None
        if binary is not None and needed is not None and have and needed > have:
            wanted = ".".join(map(str, needed))
            problems.append(
                Problem(
                    f"builds.{name}.basedir",
                    f"a server this system's glibc {'.'.join(map(str, have))} runs",
                    f"{binary.name} needs symbol version GLIBC_{wanted}",
                    'run it with a newer C library: glibc = "trixie" or "sid" on its variant, or '
                    "the package from its suite ([builds] package + suite)",
                )
            )
    return problems


def dataset_bytes(exp: Experiment) -> int:
    """The prepared dataset's size on the tmpfs, as the server kind estimates it from its workload tool's."""
    kind = servers.kind(exp.file.experiment.server)
    return kind.dataset_estimate(exp, workloads.of(exp.file).dataset_estimate(exp))


def fit_design(exp: Experiment) -> Experiment:
    """`exp` as this machine can run it: the interleaved design starts a round's servers of one
    thread count at once, each on its own copy of the dataset, so the tmpfs must hold that many
    copies and the memory their buffer pools too. When they do not fit, a file that chose no
    design runs sequentially (the reason says why, with the figures); one that asked for
    interleaved is refused (exit 3, with the figures)."""
    e = exp.file.experiment
    kind = servers.kind(e.server)
    if not e.interleaved or kind.interleaved_refusal:
        return exp
    seats = 1
    for labels in exp.file.variants.values():
        seats *= len(labels)
    copy = dataset_bytes(exp)
    rows = exp.file.dataset.tables * exp.file.dataset.table_size
    tmpfs_need = (1 + seats) * copy  # the snapshot and one copy a server
    ram_need = tmpfs_need + seats * (max(256 << 20, rows * 400) + (128 << 20))  # the copies, buffer pools, server
    place = str(storage.base(e.storage))
    ram_need -= tmpfs_need if e.storage != "tmpfs" else 0  # on disk the copies are not in memory
    tmpfs_free = shutil.disk_usage(place).free if os.path.isdir(place) else 0
    ram_free = memory_available()
    if tmpfs_free >= tmpfs_need and (ram_free is None or ram_free >= ram_need):
        return exp
    figures = (
        f"{seats} servers at once need about {tmpfs_need >> 20} MiB on {place} ({tmpfs_free >> 20} MiB free) and "
        f"{ram_need >> 20} MiB of memory ({'unknown' if ram_free is None else f'{ram_free >> 20} MiB'} available)"
    )
    if "design" in (exp.raw.get("experiment") or {}):
        remedy = 'free memory, use a smaller dataset, or design = "sequential" (one server at a time)'
        problem = Problem("experiment.design", "room for every server of a round", figures, remedy)
        raise EnvironmentProblem(exp.source, [problem])
    from perflab.spec.design import with_design

    return with_design(exp, "sequential", f"sequential: {figures}")


def memory_available() -> int | None:
    """MemAvailable of /proc/meminfo in bytes (None where there is none)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) << 10
    except (OSError, ValueError, IndexError):
        return None
    return None


def _allocators(exp: Experiment) -> list[Problem]:
    """Every preload, the server's and the client's, installed here (the client's is not traced); a
    server's on a server host is looked for there (hosts/preflight.py)."""
    problems = []
    here = preloads_by_host(exp.file).get(None, set())  # a preload on a server host is looked for there
    for axis, entries in exp.file.variants.items():
        for label, variant in entries.items():
            for key in ("preload", "client_preload"):
                name = getattr(variant, key)
                if name is None or (key == "preload" and name not in here and name != "glibc"):
                    continue
                try:
                    library = allocators.resolve(name)
                except LookupError as exc:
                    problems.append(
                        Problem(f"variants.{axis}.{label}.{key}", f"{name} installed", "no library", str(exc))
                    )
                except FileNotFoundError:
                    problems.append(Problem(f"variants.{axis}.{label}.{key}", "an existing file", name))
                else:
                    if exp.file.observe.alloc is not None and library is not None and key == "preload":
                        problems += _stackable(f"variants.{axis}.{label}.preload", library)
    return problems


def _client_libraries(exp: Experiment) -> list[Problem]:
    """A client_library sysbench cannot load (another ABI, missing symbols) is refused now."""
    from perflab.workloads import client_variant

    problems = []
    for axis, entries in exp.file.variants.items():
        for label, variant in entries.items():
            said = client_variant.load_problem(Path(variant.client_library)) if variant.client_library else None
            if said:
                problems.append(
                    Problem(
                        f"variants.{axis}.{label}.client_library",
                        f"a client library sysbench can load as {client_variant.SONAME}",
                        said,
                        "sysbench needs libmariadb's API and symbol versions: a libmariadb.so.3 of MariaDB "
                        "Connector/C (Debian: libmariadb3), not a libmysqlclient",
                    )
                )
    return problems


def _stackable(where: str, library: Path) -> list[Problem]:
    """[observe] alloc forwards malloc, free, calloc and realloc to the variant's preload: one that
    does not define them is not an allocator, and the counter would count glibc's calls under the
    variant's name (unreadable symbols are left to the check after the server's start)."""
    missing = allocators.missing_entry_points(library)
    if not missing:
        return []
    return [
        Problem(
            where,
            f"an allocator defining {', '.join(allocators.ENTRY_POINTS)} (the allocation counter forwards to it)",
            f"{library} defines no {', '.join(missing)}",
            "preload a malloc implementation (jemalloc, tcmalloc, mimalloc or its .so), or leave out "
            "[observe] alloc: glibc would do the work the figures name this library for",
        )
    ]


# ---------------------------------------------------------------------------- profilers
