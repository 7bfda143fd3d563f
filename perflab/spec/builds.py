"""`[builds.NAME]`: a server binary a variant can pick with `build = "NAME"` (docs/builds.md).

A build is exactly one of:
    package = "mariadb-server-core=1:10.11.18-0+deb12u1"  another version of a Debian package,
                                                          unpacked into perflab's cache
    package = "mysql-server-core", suite = "sid"          a package of another Debian suite (its
                                                          newest, or NAME=VERSION) with its whole
                                                          dependency closure in a private root,
                                                          run through that root's loader
    debug_symbols = true                                  (with suite) its -dbgsym too, from the
                                                          suite's debug archive, when it can be had
    basedir = "/opt/mariadb-11.4"                          an install tree or build directory
    source  = "debian" | "/path/to/tree"                   built by perflab from Debian's source
                                                          package or a local tree, with a recipe:
    compiler = "gcc-12" | "clang-16", flags = "debian" | "none", cflags, cxxflags, ldflags,
    frame_pointers, lto, cmake = { OPTION = value }, pgo = true, train_duration = "60s"

    BuildSpec.model_validate({"package": "mariadb-server-core=1:10.11.18-0+deb12u1"}).kind  -> "package"
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from perflab.spec.fields import Duration, fail

PACKAGE_RE = re.compile(r"^[a-z0-9][a-z0-9+.-]+=[A-Za-z0-9.+~:-]+\Z")
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9+.-]+\Z")  # with suite: the suite's newest version
COMPILER_RE = re.compile(r"^(gcc|clang)-[0-9]+\Z")
CMAKE_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
# where a server binary lives in an install tree (bin/, sbin/, libexec/) or a cmake build dir (sql/)
SERVER_BINARIES = (
    "sbin/mariadbd",
    "bin/mariadbd",
    "sql/mariadbd",
    "libexec/mariadbd",
    "usr/sbin/mariadbd",
    "sbin/mysqld",
    "bin/mysqld",
    "sql/mysqld",
    "libexec/mysqld",
    "usr/sbin/mysqld",
    "bin/postgres",  # server = "postgresql": an install tree with bin/postgres, bin/initdb, lib/, share/
)
# recipe keys that only mean something when perflab builds from source
RECIPE_KEYS = (
    "compiler",
    "flags",
    "cflags",
    "cxxflags",
    "ldflags",
    "frame_pointers",
    "lto",
    "cmake",
    "configure",
    "pgo",
)
CmakeValue = StrictStr | StrictInt | StrictBool


def server_binary(basedir: Path) -> Path | None:
    """The server binary inside an install tree or build directory, or None."""
    for relative in SERVER_BINARIES:
        path = basedir / relative
        if path.is_file():
            return path
    # Debian's PostgreSQL layout, in a private root: usr/lib/postgresql/MAJOR/bin/postgres
    found = sorted(basedir.glob("usr/lib/postgresql/*/bin/postgres"), key=lambda p: _major(p.parents[1].name))
    return found[-1] if found else None


def _major(name: str) -> int:
    return int(name) if name.isdigit() else -1


class BuildSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # the Debian suite `package` comes from, in a private root (builds/debroot.py); None: the
    # suites this machine's apt knows, unpacked beside the system's libraries. Before `package`,
    # whose check reads it.
    suite: Literal["bookworm", "bookworm-backports", "trixie", "sid"] | None = None
    package: StrictStr | None = None
    # with suite: the package's -dbgsym from the suite's debug archive too (SUITE-debug, unpacked
    # into the root's usr/lib/debug), so perf and pmp name static functions; when it cannot be
    # had, the build runs without (its record's `debug_symbols` says why)
    debug_symbols: StrictBool = False
    basedir: StrictStr | None = None
    source: StrictStr | None = None
    compiler: StrictStr = "gcc-12"
    # the base flags: "debian" = dpkg-buildflags with hardening=+all, what Debian's own package
    # is built with (so a source build differs from the package only by what the recipe adds);
    # "none" = cmake's RelWithDebInfo flags alone
    flags: Literal["debian", "none"] = "debian"
    cflags: StrictStr = ""
    cxxflags: StrictStr = ""
    ldflags: StrictStr = ""
    # None: the source's own choice (MariaDB's RelWithDebInfo adds -fno-omit-frame-pointer, and
    # Debian's package has them); true: forced on, leaf functions too; false: forced off
    frame_pointers: StrictBool | None = None
    lto: StrictBool = False
    cmake: dict[StrictStr, CmakeValue] = {}
    configure: list[StrictStr] = []  # PostgreSQL (autoconf): extra ./configure options, after perflab's
    pgo: StrictBool = False
    train_duration: Duration = 60.0  # pgo: seconds of the experiment's workload to train on
    jobs: Annotated[StrictInt, Field(ge=1, le=256)] | None = None  # parallel compile jobs; default: CPUs

    @property
    def kind(self) -> str:
        return "package" if self.package else "basedir" if self.basedir else "source"

    @field_validator("package")
    @classmethod
    def _package(cls, value: str, info: ValidationInfo) -> str:
        if not PACKAGE_RE.match(value) and not (info.data.get("suite") and NAME_RE.match(value)):
            raise fail(
                "NAME=VERSION of a Debian package"
                + (" (a NAME alone only with suite = ...)" if NAME_RE.match(value) else ""),
                'e.g. package = "mariadb-server-core=1:10.11.18-0+deb12u1"; versions: apt-cache madison NAME',
            )
        return value

    @field_validator("basedir")
    @classmethod
    def _basedir(cls, value: str) -> str:
        path = Path(value)
        if not value.startswith("/") or not value.isprintable():
            raise fail("an absolute path to an install tree or build directory", 'e.g. basedir = "/opt/mariadb"')
        if not path.is_dir():
            raise fail("an existing directory", "check the path")
        if server_binary(path) is None:
            raise fail(
                "a directory with a server binary",
                f"looked for {', '.join(SERVER_BINARIES[:4])}, ... (mariadbd or mysqld), bin/postgres inside it",
            )
        return value

    @field_validator("source")
    @classmethod
    def _source(cls, value: str) -> str:
        if value == "debian" or PACKAGE_RE.match(value) and value.startswith("debian="):
            return value
        if not value.startswith("/") or not value.isprintable():
            raise fail(
                '"debian", "debian=VERSION" (Debian\'s source package) or an absolute path to a source tree',
                "versions: apt-cache showsrc mariadb | grep ^Version",
            )
        if not any((Path(value) / top).is_file() for top in ("CMakeLists.txt", "configure")):
            raise fail(
                "a source tree with a CMakeLists.txt (MariaDB) or a configure script (PostgreSQL)",
                "check the path: it must be the tree's top directory",
            )
        return value

    @field_validator("compiler")
    @classmethod
    def _compiler(cls, value: str) -> str:
        if not COMPILER_RE.match(value):
            raise fail('a compiler such as "gcc-12" or "clang-16"', "gcc-N or clang-N, as Debian installs them")
        return value

    @field_validator("cflags", "cxxflags", "ldflags")
    @classmethod
    def _flags(cls, value: str) -> str:
        if not value.isprintable():
            raise fail("flags on one line, without control characters", None)
        return value

    @field_validator("configure")
    @classmethod
    def _configure(cls, value: list[str]) -> list[str]:
        for option in value:
            if not option.startswith("--") or not option.isprintable() or option.startswith("--prefix"):
                raise fail("./configure options such as --with-lz4", f"{option!r}: the prefix is perflab's")
        return value

    @field_validator("cmake")
    @classmethod
    def _cmake(cls, value: dict[str, CmakeValue]) -> dict[str, CmakeValue]:
        for name, option in value.items():
            if not CMAKE_NAME_RE.match(name):
                raise fail("cmake option names of letters, digits and '_'", f"{name!r}: e.g. PLUGIN_PERFSCHEMA")
            if (
                name.startswith("CMAKE_C")
                and name.endswith("FLAGS")
                or name in ("CMAKE_C_COMPILER", "CMAKE_CXX_COMPILER")
            ):
                raise fail(f"no {name} in cmake", "use compiler, cflags, cxxflags, ldflags")
            if not str(option).isprintable():
                raise fail("cmake values on one line", f"{name}")
        return value

    @model_validator(mode="before")
    @classmethod
    def _one_kind(cls, data: object) -> object:
        if not isinstance(data, dict):
            return data
        kinds = [k for k in ("package", "basedir", "source") if k in data]
        if len(kinds) != 1:
            found = ", ".join(kinds) or "none of them"
            raise fail("exactly one of package, basedir or source", f"this build has {found}")
        recipe = [k for k in (*RECIPE_KEYS, "train_duration", "jobs") if k in data]
        if kinds[0] != "source" and recipe:
            raise fail(f"no {', '.join(recipe)} with {kinds[0]}", "a recipe applies only to source = ...")
        if "suite" in data and kinds[0] != "package":
            raise fail("suite only with package", 'e.g. package = "mysql-server-core", suite = "sid"')
        if "debug_symbols" in data and "suite" not in data:
            raise fail(
                "debug_symbols only with suite",
                "the -dbgsym comes from the suite's debug archive into its private root; for the installed"
                " server, apt-get install PACKAGE-dbgsym (/usr/lib/debug is read as it is)",
            )
        if "train_duration" in data and not data.get("pgo"):
            raise fail("pgo = true beside train_duration", "train_duration is the PGO training run's length")
        return data
