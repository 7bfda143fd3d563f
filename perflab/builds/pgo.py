"""Two-stage PGO: an instrumented build, a training run, the profile-guided build.

1. build with -fprofile-generate -fprofile-update=atomic (atomic counters: the 004 report
   lost profile data to races between the server's threads)
2. train: the caller's `train(build)` runs the instrumented server (by default the
   experiment's own workload on its dataset) and stops it cleanly, so that every .gcda
   file is written at exit
3. the .gcda files are kept in the cache (profiles/KEY-TRAINING/: the instrumented build's
   key and the training's, a hash of what it ran), their hash joins the final build's key
4. build with -fprofile-use -fprofile-correction, the profile restored into the build tree;
   a build that did not use it fails at `profile` (source.profile_use)

build = pgo(name, spec, src, cache, listen, train, training="a1b2...")   # training: its identity
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from perflab.builds import Build, BuildError
from perflab.builds import recipes as R
from perflab.builds import source as S

Train = Callable[[Build], str]  # runs the instrumented server, stops it cleanly; returns its log


def profile_dir(cache: Path, instrumented: Build, training: str) -> Path:
    return cache / "profiles" / f"{instrumented.extra['key']}-{training[:12]}"


def profile_hash(directory: Path) -> str:
    digest = hashlib.sha256()
    for data in sorted(directory.rglob("*.gcda")):
        digest.update(str(data.relative_to(directory)).encode() + b"\0" + data.read_bytes())
    return digest.hexdigest()[:16]


def stored_profile(cache: Path, instrumented: Build, training: str) -> tuple[str, Path] | None:
    """The stored profile (its hash, its .gcda directory), if whole: data that no longer hashes
    to what profile.json says (files deleted or changed since) is trained again, never built on."""
    home = profile_dir(cache, instrumented, training)
    try:
        meta = json.loads((home / "profile.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("hash") != profile_hash(home / "data"):
        return None
    return meta["hash"], home / "data"


def pgo(
    name: str, spec: S.BuildSpec, src: S.Source, cache: Path, listen: S.Listener, train: Train, training: str
) -> Build:
    """`training`: what `train` runs (workload, dataset, duration), hashed: another training is
    another profile, so another final build."""
    instrumented = R.build(name, spec, src, cache, listen, stage="generate")
    profile = stored_profile(cache, instrumented, training) or _train(
        name, src, cache, instrumented, listen, train, training
    )
    final = R.build(name, spec, src, cache, listen, stage="use", profile=profile)
    return replace(final, extra={**final.extra, "profile": profile[0], "instrumented": instrumented.sha256})


def _train(
    name: str, src: S.Source, cache: Path, instrumented: Build, listen: S.Listener, train: Train, training: str
) -> tuple[str, Path]:
    tree = src.work / "build"
    for stale in tree.rglob("*.gcda"):  # counts of an earlier training are not this one's
        stale.unlink()
    listen("build_step", {"name": name, "step": "train"})
    log = train(instrumented)
    found = list(tree.rglob("*.gcda"))
    if not found:
        raise BuildError(
            name,
            "train",
            None,
            f"the instrumented server wrote no profile data under {tree} (did it stop cleanly?)",
        )
    home = profile_dir(cache, instrumented, training)
    shutil.rmtree(home, ignore_errors=True)
    for data in found:
        target = home / "data" / data.relative_to(tree)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(data, target)
    digest = profile_hash(home / "data")
    meta = {"hash": digest, "files": len(found), "instrumented_sha256": instrumented.sha256}
    (home / "train.txt").write_text(log, encoding="utf-8")
    (home / "profile.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return digest, home / "data"
