"""PostgreSQL builds from source: Debian's postgresql-15 source package or a local tree (autoconf).

Steps, each logged to builds/KEY/logs/STEP.txt (as MariaDB's, builds/source.py):
    configure  SOURCE/configure, run in the build tree (a VPATH build: the source stays clean),
               with the recipe's compiler and flags and CONFIGURE below
    build      make: src/ only (the server, its tools, libpq, plpgsql; no docs, no contrib,
               no other PL languages: they are not configured)
    install    make install DESTDIR=builds/KEY/stage, moved to builds/KEY/install (bin/postgres,
               bin/initdb, bin/pgbench, bin/psql, lib/postgresql/, share/): postgres finds its
               share/ and lib/ relative to its binary. A file installed anywhere else fails the
               build (nothing outside the cache is ever written)

CONFIGURE keeps what Debian's package configures that a server run uses (--enable-debug,
thread safety, the system's time zone data, port 5432) and leaves out what needs libraries a
benchmark machine lacks and a pgbench/sysbench run never loads (ICU: initdb --locale-provider
is libc; readline: psql is not used interactively; PL/Perl, PL/Python, PL/Tcl, LLVM JIT, GSSAPI,
LDAP, PAM, SELinux, systemd, NLS, lz4, zstd). zlib stays (libz-dev: `make setup`).

Debian's amd64 package adds -fno-omit-frame-pointer to its CFLAGS (postgresql-common's
server/postgresql.mk): with flags = "debian" and frame_pointers unset, so does this build.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from perflab.builds import Build, BuildError
from perflab.builds import source as S
from perflab.spec.builds import BuildSpec

RECIPE_VERSION = 1  # bump when the steps change what a key builds
DEBIAN_SOURCE = "postgresql-15"
CONFIGURE = (
    "--enable-debug",
    "--enable-thread-safety",
    "--with-pgport=5432",
    "--with-system-tzdata=/usr/share/zoneinfo",
    "--without-icu",
    "--without-readline",
    "--without-llvm",
    "--disable-nls",
    "--with-zlib",
)
DEBIAN_AMD64_CFLAGS = "-fno-omit-frame-pointer"  # postgresql.mk: "hierarchical profile generation"
BINARY = "bin/postgres"  # in the install tree
TOOLS = ("initdb", "pgbench", "psql", "pg_ctl")


def flags(spec: BuildSpec, work: Path, stage: str = "plain") -> dict[str, str]:
    """MariaDB's flags (source.flags: Debian's or none, frame pointers, LTO, the PGO stage, the
    user's last), with Debian's amd64 frame pointers put in front when the recipe leaves them unset."""
    made = S.flags(spec, work, stage)
    if spec.flags == "debian" and spec.frame_pointers is None:
        made["CFLAGS"] = f"{DEBIAN_AMD64_CFLAGS} {made['CFLAGS']}"
    return made


def configure_options(spec: BuildSpec) -> list[str]:
    return [*CONFIGURE, *spec.configure]


def recipe(spec: BuildSpec, src: S.Source, stage: str = "plain", profile: str | None = None) -> dict[str, Any]:
    """Everything that decides the binary; its hash is the cache key (no cmake here: autoconf)."""
    cc, _ = S.toolchain(spec.compiler)
    return {
        "recipe_version": RECIPE_VERSION,
        "server": "postgresql",
        "source": src.label,
        "source_fingerprint": src.fingerprint,
        "compiler": spec.compiler,
        "compiler_version": S._first_line([cc, "--version"]),
        "make_version": S._first_line(["make", "--version"]),
        "flags": flags(spec, src.work / "build", stage),
        "configure": configure_options(spec),
        "stage": stage,
        "profile": profile,
    }


def configure_argv(src: S.Source, made: dict[str, Any], cc: str, prefix: Path) -> list[str]:
    """SOURCE/configure with the recipe: no shell, each VAR=value one argument. --libdir names
    "postgresql": Debian's 50-per-version-dirs.patch otherwise sets pkglibdir (plpgsql.so, the
    encoding conversions, pgxs) to /usr/lib/postgresql/15/lib, the installed package's own."""
    fl = made["flags"]
    argv = [str(src.tree / "configure"), f"--prefix={prefix}", f"--libdir={prefix}/lib/postgresql"]
    argv += made["configure"]
    return argv + [f"CC={cc}", f"CFLAGS={fl['CFLAGS']}", f"LDFLAGS={fl['LDFLAGS']}"]


def make_argv(tree: Path, jobs: int, *targets: str) -> list[str]:
    return ["make", "-C", str(tree / "src"), f"-j{jobs}", *targets]


def build(
    name: str,
    spec: BuildSpec,
    src: S.Source,
    cache: Path,
    listen: S.Listener,
    *,
    stage: str = "plain",
    profile: tuple[str, Path] | None = None,
) -> Build:
    """The PostgreSQL build `spec` of `src`: from the cache, or configured, built and installed now."""
    made = recipe(spec, src, stage, profile[0] if profile else None)
    key, home, found = S.home_for(made, cache)
    if found is not None:
        return found.named(name)
    started = time.monotonic()
    tree, resumed = S._tree_for(src, key)
    cc, _ = S.toolchain(spec.compiler)
    prefix = home / "install"  # not in the key: postgres is relocatable (paths relative to its binary)
    S._step(name, "configure", configure_argv(src, made, cc, prefix), home, tree, listen, cache)
    if profile is not None:  # the training run's counts, back where the objects are compiled
        S._restore_profile(profile[1], tree)
    jobs = spec.jobs or max(1, len(S._cpus()))
    # libpq's Makefile fails a libpq.so that references exit(), unless enable_coverage: libgcov does
    more = ["enable_coverage=yes"] if stage == "generate" else []
    S._step(name, "build", make_argv(tree, jobs, *more), home, tree, listen, cache)
    used = S.profile_use(name, profile[1], tree, home / "logs" / "build.txt") if profile is not None else {}
    stage_root = home / "stage"
    install = make_argv(tree, 1, *more, "install", f"DESTDIR={stage_root}")
    S._step(name, "install", install, home, tree, listen, cache)
    _unstage(name, stage_root, prefix, home / "logs" / "install.txt")
    _check_tools(name, prefix, home)
    share = prefix / "share"
    return S.finish(prefix / BINARY, name, home, made, started, share=share, resumed=resumed, stage=stage, **used)


def _check_tools(name: str, prefix: Path, home: Path) -> None:
    """A build whose install lacks the server or a tool a cell runs fails at `install`."""
    missing = [t for t in ("postgres", *TOOLS) if not (prefix / "bin" / t).is_file()]
    if missing:
        raise BuildError(name, "install", home / "logs" / "install.txt", f"no {', '.join(missing)} in {prefix}/bin")


def _unstage(name: str, stage_root: Path, prefix: Path, log: Path) -> None:
    """`make install DESTDIR=STAGE` put everything under STAGE/PREFIX; moved to PREFIX. Anything
    else under STAGE is a path the source hard-codes outside the prefix: the build fails naming
    it, and nothing was written there (a Debian patch once sent pkglibdir to /usr/lib/postgresql)."""
    staged = stage_root / str(prefix).lstrip("/")
    outside = sorted(
        "/" + str(p.relative_to(stage_root))
        for p in stage_root.rglob("*")
        if not p.is_dir() and staged not in p.parents
    )
    if outside or not staged.is_dir():
        found = ", ".join(outside[:5]) + (f" and {len(outside) - 5} more" if len(outside) > 5 else "")
        raise BuildError(name, "install", log, f"make install wrote outside {prefix}: {found or 'nothing inside it'}")
    shutil.rmtree(prefix, ignore_errors=True)
    staged.rename(prefix)
    shutil.rmtree(stage_root)
