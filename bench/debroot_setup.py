"""Private roots (issue 34): how long making one takes, cold and cached (docs/builds.md).

What it measures, on this machine, for each round (a fresh throw-away cache):
  1. cold: make_root(PACKAGE, SUITE) into an empty cache: apt-get update of the suite's private
     index, resolution, download of the closure, dpkg-deb -x of every package, the loader's
     --version;
  2. a second root from the warm index: the same, its root directory removed first (no update;
     the .debs are downloaded again: a made root keeps none);
  3. cached: the same request again (the index remembers its key), and the pinned request
     (PACKAGE=VERSION: one apt resolution, then the same key);
  4. `mysqld --version` through the root's loader (the root's cost at every start is in there).
The download's speed is the mirror's: the figures hold for a mirror as near as this one.

Run: python3 bench/debroot_setup.py [--rounds 3] [--package mysql-server-core] [--suite sid]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import _common as C

from perflab.builds import debroot as D
from perflab.places.proc import clean_env


def timed(action) -> tuple[float, object]:
    started = time.monotonic()
    result = action()
    return time.monotonic() - started, result


def one_round(package: str, suite: str, binary: str) -> dict[str, float]:
    cache = Path(tempfile.mkdtemp(prefix="plbench-debroot-"))
    try:
        cold, root = timed(lambda: D.make_root(package, suite, cache))
        shutil.rmtree(root.dir.parent)
        warm_index, root = timed(lambda: D.make_root(package, suite, cache))
        cached, _ = timed(lambda: D.make_root(package, suite, cache))
        name = package.split("=")[0]
        pinned, _ = timed(lambda: D.make_root(f"{name}={root.packages[name]}", suite, cache))
        argv = root.argv(binary, ["--version"])
        version, _ = timed(lambda: subprocess.run(argv, check=True, capture_output=True, env=clean_env()))
        size = sum(f.stat().st_size for f in root.dir.rglob("*") if f.is_file() and not f.is_symlink())
        return {"cold_s": cold, "warm_index_s": warm_index, "cached_s": cached, "pinned_s": pinned,
                "version_s": version, "packages": len(root.packages), "root_mb": size / 1e6}  # fmt: skip
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--package", default="mysql-server-core")
    parser.add_argument("--suite", default="sid")
    parser.add_argument("--binary", default="usr/sbin/mysqld")
    args = parser.parse_args()
    machine = C.Machine()
    rounds = [one_round(args.package, args.suite, args.binary) for _ in range(args.rounds)]
    info = machine.finish()
    keys = ("cold_s", "warm_index_s", "cached_s", "pinned_s", "version_s")
    rows = [[k, *(f"{r[k]:.3f}" for r in rounds), f"{C.mean([r[k] for r in rounds]):.3f}"] for k in keys]
    C.say(C.table(["seconds", *(f"round {i + 1}" for i in range(len(rounds))), "mean"], rows))
    C.say(f"{rounds[0]['packages']} packages, {rounds[0]['root_mb']:.0f} MB unpacked")
    C.say(C.Machine.describe(info))
    C.final_json({"package": args.package, "suite": args.suite, "rounds": rounds, "machine": info})


if __name__ == "__main__":
    C.main_guard(main)
