"""A PostgreSQL build from another Debian suite, in a private root (builds/debroot.py):
sid's postgresql-18 needs sid's C library, so each of its programs runs through the root's loader.

postgres finds its share/ and lib/ relative to its own path, and initdb and pg_ctl find postgres
beside themselves and run it (initdb: through popen, one path). So perflab gives such a build a
bin/ of wrappers, one per program, each exec'ing the root's loader with the real program:

    WORK/pg-roots/KEY/root/usr/lib/postgresql/18/bin/postgres        the real one (a copy, below)
    WORK/pg-roots/KEY/shadow/usr/lib/postgresql/18/bin/postgres      exec LOADER ... REAL "$@"
    WORK/pg-roots/KEY/shadow/usr/lib/postgresql/18/bin/initdb        exec LOADER ... --argv0 "$0" REAL "$@"
    WORK/pg-roots/KEY/shadow/usr/share -> ../root/usr/share

Every program but postgres gets `--argv0 "$0"`, so that what it looks for beside itself is a
wrapper; postgres keeps its real path (its share/ and lib/ are found from it; the profilers read
the program behind the loader from its command line). The share/ link serves initdb, which looks
for its input files relative to itself.

When perflab is root, postgres runs as the postgres user, who cannot reach perflab's cache (under
root's 0700 home): the root is then copied into the run's work directory (tmpfs, once per run;
documentation and manual pages left out) and given to that user, as source builds are.

    shadow = ShadowBin.make(build, workdir)    # shadow.bindir: where pg_binary looks
    shadow.real("postgres")                    # the program itself, for the allocator proof
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perflab.builds import launcher, write_wrapper
from perflab.servers.postgresql.user import give, reachable

LEFT_OUT = ("doc", "man", "info", "lintian", "bug")  # directory names never copied: not run
NO_ARGV0 = ("postgres",)  # programs that keep their real path as argv[0]
COMPLETE = ".complete"


@dataclass(frozen=True)
class ShadowBin:
    bindir: Path  # the wrappers
    real_bindir: Path  # the programs they run

    @classmethod
    def make(cls, build: Any, workdir: Path) -> ShadowBin:
        record = build.extra["root"]
        source = Path(record["dir"])
        binary = Path(build.binary)
        inside = binary.is_relative_to(source)  # else this system's postgres with the root's C library (glibc = ...)
        base = workdir / "pg-roots" / record["key"]
        copied = base / "root"
        if reachable(source):
            copied = source
        elif not (base / COMPLETE).is_file():
            shutil.rmtree(base, ignore_errors=True)
            shutil.copytree(source, copied, symlinks=True, ignore=shutil.ignore_patterns(*LEFT_OUT))
        origin = copied if inside else Path("/")  # where the programs' tree (bin/, share/) is
        relative_bin = binary.parent.relative_to(source if inside else Path("/"))
        shadow = cls(base / "shadow" / relative_bin, origin / relative_bin)
        if not (base / COMPLETE).is_file():
            shadow._write(launcher({**record, "dir": str(copied)}), origin, base / "shadow")
            (base / COMPLETE).write_text(f"{source}\n", encoding="utf-8")
            give(base)
        return shadow

    def real(self, name: str) -> Path:
        return self.real_bindir / name

    def _write(self, loader: list[str], origin: Path, top: Path) -> None:
        shutil.rmtree(top, ignore_errors=True)
        self.bindir.mkdir(parents=True)
        for program in sorted(self.real_bindir.iterdir()):
            if not program.is_file():
                continue
            write_wrapper(self.bindir / program.name, [*loader, str(program)], argv0=program.name not in NO_ARGV0)
        share = top / "usr" / "share"
        share.parent.mkdir(parents=True, exist_ok=True)
        share.symlink_to(origin / "usr" / "share")
