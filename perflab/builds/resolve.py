"""A [builds] entry -> a Build: unpacked, found in a basedir, or built (PGO included), cached.

build = resolve("pgo", spec, cache, listen, train)   # BuildError: only its cells fail
status("pgo", spec, cache)   -> "cached (built in 41 min)" | "to build: about 45 min"
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from perflab.errors import PerflabError
from perflab.builds import Build, BuildError, describe, read_manifest
from perflab.cache import cache_root
from perflab.builds import package as P
from perflab.builds import pgo as G
from perflab.builds import recipes as R
from perflab.builds import source as S
from perflab.builds.fetch import fetch
from perflab.servers import kind
from perflab.spec.matrix import Experiment
from perflab.spec.schema import ExperimentFile
from perflab.spec.builds import BuildSpec


def training_id(exp: ExperimentFile, spec: BuildSpec) -> str:
    """What a PGO training runs, hashed: the workload and its options, the dataset, the thread
    count, the server options and the duration. Keys left unset (None) are left out, so a key a
    later perflab adds (as `dataset.scale` for pgbench) does not orphan every stored profile."""

    def given(section: Any) -> dict[str, Any]:
        return {k: v for k, v in section.model_dump(mode="json").items() if v is not None}

    what = {
        "workload": given(exp.workload),
        "dataset": given(exp.dataset),
        "server_options": exp.server_options,
        "train_duration": spec.train_duration,
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:16]


def installed(server: str = "mariadb") -> Build:
    return describe(kind(server).installed_binary(), name=None, kind="installed")


def resolve(
    name: str,
    spec: BuildSpec,
    cache: Path,
    listen: S.Listener,
    train: G.Train,
    training: str = "",
    server: str = "mariadb",
) -> Build:
    try:
        if spec.kind == "package" and spec.suite is not None:
            assert spec.package is not None
            return P.from_root(name, spec.package, spec.suite, cache, spec.debug_symbols)
        if spec.kind == "package":
            assert spec.package is not None
            return P.unpack(name, spec.package, cache)
        if spec.kind == "basedir":
            assert spec.basedir is not None
            return from_basedir(name, Path(spec.basedir), server)
        assert spec.source is not None
        src = fetch(spec.source, cache, name, server)
        if spec.pgo:
            return G.pgo(name, spec, src, cache, listen, train, training)
        return R.build(name, spec, src, cache, listen)
    except BuildError:
        raise
    except PerflabError as exc:  # a tool or a step that failed outside a logged build step
        raise BuildError(name, "setup", None, exc.message + (f"\nhint: {exc.hint}" if exc.hint else "")) from None


def from_basedir(name: str, basedir: Path, server: str = "mariadb") -> Build:
    return kind(server).basedir_build(name, basedir)


def cached(name: str, spec: BuildSpec, cache: Path, training: str = "", server: str = "mariadb") -> Build | None:
    """The build as `resolve` would return it, if that needs nothing made or downloaded: a
    basedir, an unpacked package, a cached source build (PGO: its final build); else None.
    What a calibration is checked against before the builds are made (cli/calibrated.py)."""
    if spec.kind == "basedir":
        assert spec.basedir is not None
        return from_basedir(name, Path(spec.basedir), server)
    if spec.kind == "package" and spec.suite is not None:
        return None  # the suite's newest is known only once its index is read
    if spec.kind == "package":
        assert spec.package is not None
        return P.cached(name, spec.package, cache)
    src = _fetched(spec, cache, server)
    if src is None:
        return None
    if not spec.pgo:
        found = R.cached(spec, src, cache)
    else:
        instrumented = read_manifest(cache / "builds" / S.key_of(R.recipe(spec, src, "generate")))
        profile = G.stored_profile(cache, instrumented, training) if instrumented is not None else None
        found = R.cached(spec, src, cache, "use", profile[0]) if profile is not None else None
    return None if found is None else found.named(name)


def available(exp: Experiment) -> dict[str | None, Build]:
    """Each server binary the experiment's cells here run that is here now (None: the installed
    server), for the checks of `perflab run --check`; a build not made yet is left out."""
    server = exp.file.experiment.server
    out: dict[str | None, Build] = {}
    for name in dict.fromkeys(c.build for c in exp.round(1) if c.server_host is None):
        try:
            if name is None:
                found = None if kind(server).installed_refusal else installed(server)
            else:
                wanted = exp.file.builds[name]
                found = cached(name, wanted, cache_root(), training_id(exp.file, wanted), server)
        except PerflabError:
            found = None  # not here: its own check, or the build step, says why
        if found is not None:
            out[name] = found
    return out


def status(name: str, spec: BuildSpec, cache: Path, training: str = "", server: str = "mariadb") -> str:
    """What `perflab run --check` says of a build: cached, or what building it will take."""
    if spec.kind == "basedir":
        return f"basedir {spec.basedir}"
    if spec.kind == "package" and spec.suite is not None:
        debug = f", with its -dbgsym from {spec.suite}-debug" if spec.debug_symbols else ""
        return f"{spec.package} from {spec.suite}{debug}, in a private root (seconds; cached once made)"
    if spec.kind == "package":
        assert spec.package is not None
        return "cached" if P.cached(name, spec.package, cache) else "to download and unpack (seconds)"
    stages = ["plain"] if not spec.pgo else ["generate", "use"]
    try:
        src = _fetched(spec, cache, server)
        if src is not None and not spec.pgo:
            found = R.cached(spec, src, cache)
            if found is not None:
                return f"cached (built in {found.extra.get('build_s', 0) / 60:.0f} min)"
        if src is not None and spec.pgo:
            done = _pgo_done(spec, src, cache, training, server)
            if done is not None:
                return done
    except PerflabError as exc:
        return f"cannot be built here: {exc.message}"
    except OSError as exc:
        return f"cannot be built here: {exc}"
    minutes = kind(server).build_estimate_s * len(stages) / 60
    extra = f" + {spec.train_duration:.0f} s of training" if spec.pgo else ""
    return f"to build: about {minutes:.0f} min on 2 CPUs{extra} (logs kept in the cache)"


def _fetched(spec: BuildSpec, cache: Path, server: str = "mariadb") -> S.Source | None:
    """The source if already here (a local tree, or a Debian version fetched before): no download."""
    assert spec.source is not None
    if spec.source.startswith("/"):
        return fetch(spec.source, cache, "check", server)
    for home in sorted((cache / "src").glob(f"{kind(server).debian_source}_*")):
        version = (home / "unpacked").read_text(encoding="utf-8").strip() if (home / "unpacked").is_file() else None
        if version and (spec.source == "debian" or spec.source == f"debian={version}"):
            return fetch(f"debian={version}", cache, "check", server)
    return None


def _pgo_done(spec: BuildSpec, src: S.Source, cache: Path, training: str, server: str = "mariadb") -> str | None:
    home = cache / "builds" / S.key_of(R.recipe(spec, src, "generate"))
    instrumented = read_manifest(home)
    if instrumented is None:
        return None
    profile = G.stored_profile(cache, instrumented, training)
    if profile is None:
        minutes = kind(server).build_estimate_s / 60 + 10
        return f"instrumented build cached; training and the final build to do (about {minutes:.0f} min)"
    final = R.cached(spec, src, cache, "use", profile[0])
    return "cached (PGO)" if final is not None else "instrumented build and profile cached; final build to do"
