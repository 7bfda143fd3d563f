"""A source build by its server kind's recipe (Kind.source_recipe, Kind.source_build): cmake for
MariaDB and MySQL (builds/source.py), configure for PostgreSQL (servers/postgresql/source.py).
Above servers/, which import builds/source.py's steps.

    src = Source.of(spec.source, cache)                 # fetched once
    build = recipes.build(name, spec, src, cache, listen)       # cached or built
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perflab.builds import Build, read_manifest
from perflab.builds.source import Listener, Source, key_of
from perflab.servers import kind
from perflab.spec.builds import BuildSpec


def recipe(spec: BuildSpec, src: Source, stage: str = "plain", profile: str | None = None) -> dict[str, Any]:
    """Everything that decides the binary; its hash is the cache key (the source's server kind's)."""
    return kind(src.server).source_recipe(spec, src, stage, profile)


def cached(spec: BuildSpec, src: Source, cache: Path, stage: str = "plain", profile: str | None = None) -> Build | None:
    return read_manifest(cache / "builds" / key_of(recipe(spec, src, stage, profile)))


def build(
    name: str,
    spec: BuildSpec,
    src: Source,
    cache: Path,
    listen: Listener,
    *,
    stage: str = "plain",
    profile: tuple[str, Path] | None = None,  # (hash, directory of .gcda files) for stage "use"
) -> Build:
    """The build `spec` of `src`: from the cache, or configured, built and installed now."""
    return kind(src.server).source_build(name, spec, src, cache, listen, stage=stage, profile=profile)
