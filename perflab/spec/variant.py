"""The experiment file's [variants.AXIS.LABEL] entries: what one label of an axis changes (a build,
server and workload options, a preload or a C library for the server, a client library and
environment for sysbench), and the axes that hold them (docs/experiment.md).

    Variant.model_validate({"preload": "jemalloc"}).preload  -> "jemalloc"
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    StrictBool,
    field_validator,
)

from perflab import allocators, elf
from perflab.errors import did_you_mean
from perflab.spec.fields import (
    STRICT,
    EnvVars,
    Rate,
    ServerOptions,
    WorkloadOptions,
    check_axis_name,
    check_label,
    check_non_empty_axis,
    fail,
)
from perflab.spec.problems import short


class _Strict(BaseModel):
    model_config = STRICT


class Variant(_Strict):
    build: str | None = None  # a [builds.NAME]; none: the installed package's server
    preload: str | None = None
    env: EnvVars = {}
    server_options: ServerOptions = {}
    workload_options: WorkloadOptions = {}  # sysbench options of this variant, over workload.options
    # the workload client (sysbench): a library preloaded into it, its environment, and another
    # libmariadb for it (loaded under the soname sysbench links: workloads/client_variant.py)
    client_preload: str | None = None
    client_env: EnvVars = {}
    client_library: str | None = None
    aslr: StrictBool | None = None  # None: [experiment] aslr
    prewarm: StrictBool | None = None  # None: [experiment] prewarm
    # the C library the server runs with: that Debian suite's libc6 and loader, in a private root
    # (builds/glibc.py); None: the server's own (the system's, or its private root's)
    glibc: Literal["bookworm", "bookworm-backports", "trixie", "sid"] | None = None
    # the host its server runs on, a [hosts.NAME] (a host axis, docs/hosts.md); None: [experiment]
    # server_host, else this machine
    server_host: str | None = None
    # the host its client runs on, a [hosts.NAME] (a host axis's client host per variant, docs/hosts.md);
    # None: [experiment] client_host, else this machine
    client_host: str | None = None
    # its client's fixed arrival rate (a rate axis: a latency-throughput curve); None: [workload] rate
    rate: Rate | None = None

    @field_validator("preload", "client_preload")
    @classmethod
    def _preload(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if value.startswith("/"):
            if not value.isprintable():
                raise fail("a path without control characters", "check the path")
            try:
                what = elf.not_preloadable(Path(value)) if Path(value).exists() else "no such file"
            except OSError as exc:
                what = exc.strerror or str(exc)
            if what == "no such file":
                raise fail("an existing .so file", "check the path, or use a known allocator name")
            if what:
                raise fail(
                    "a shared library (.so) to preload",
                    "check the path, or use a known allocator name",
                    f"{short(value, 200)!r}: {what}",
                )
            if allocators.is_alloc_tracer(Path(value)):
                raise fail(
                    "an allocator, not perflab's allocation counter",
                    "remove this preload and set alloc = true under [observe]: perflab preloads the counter "
                    "itself, in front of the variant's allocator (loaded twice, it would count every call twice)",
                    f"{short(value, 200)!r}: perflab_alloc.so",
                )
            return value
        if value not in allocators.NAMES:
            known = f"known allocators: {', '.join(allocators.NAMES)}"
            raise fail(
                f"one of {', '.join(allocators.NAMES)} or an absolute path to a .so",
                " ".join(filter(None, (did_you_mean(value, allocators.NAMES), known))),
            )
        return value

    @field_validator("client_library")
    @classmethod
    def _client_library(cls, value: str | None) -> str | None:
        if value is None:
            return None
        hint = "an absolute path to a libmariadb.so.3 (or a compatible client library) for sysbench"
        if not value.startswith("/") or not value.isprintable():
            raise fail("an absolute path to a shared library", hint)
        try:
            what = elf.not_preloadable(Path(value)) if Path(value).exists() else "no such file"
        except OSError as exc:
            what = exc.strerror or str(exc)
        if what:
            raise fail("a shared library (.so) sysbench can load", hint, f"{short(value, 200)!r}: {what}")
        return value


Axes = dict[
    Annotated[str, AfterValidator(check_axis_name)],
    Annotated[dict[Annotated[str, AfterValidator(check_label)], "Variant"], AfterValidator(check_non_empty_axis)],
]


def merge_host(variants: list[Variant], labels: list[str], default: str | None, key: str = "server_host") -> str | None:
    """The server (or client: `key`) host of one variant per axis (else `default`); two axes naming
    two hosts is an error."""
    hosts = {getattr(v, key) for v in variants} - {None}
    if len(hosts) > 1:
        raise ValueError(f"variants {labels} set {key} to both {' and '.join(sorted(hosts))}")
    return hosts.pop() if hosts else default


def merge(variants: list[Variant], labels: list[str]) -> tuple[str | None, dict, dict, dict]:
    """Combine one variant per axis; two axes setting the same thing differently is an error."""
    preload: str | None = None
    env: dict[str, str] = {}
    options: dict[str, Any] = {}
    wopts: dict[str, Any] = {}
    builds = {v.build for v in variants if v.build is not None}
    if len(builds) > 1:
        raise ValueError(f"variants {labels} name two builds ({', '.join(sorted(builds))})")
    for variant, label in zip(variants, labels):
        if variant.preload is not None:
            if preload is not None and preload != variant.preload:
                raise ValueError(f"variants {labels} set preload twice ({preload}, {variant.preload})")
            preload = variant.preload
        merged: list[tuple[dict[str, Any], dict[str, Any], str]] = [
            (env, variant.env, "env"),
            (options, variant.server_options, "server_options"),
            (wopts, variant.workload_options, "workload_options"),
        ]
        for target, source, what in merged:
            for key, val in source.items():
                if key in target and target[key] != val:
                    raise ValueError(f"variants {labels} set {what}.{key} to both {target[key]!r} and {val!r}")
                target[key] = val
    return preload, env, options, wopts


def merge_glibc(variants: list[Variant], labels: list[str]) -> str | None:
    """The C library's suite of one variant per axis; two axes naming two suites is an error."""
    suites = {v.glibc for v in variants if v.glibc is not None}
    if len(suites) > 1:
        raise ValueError(f"variants {labels} set glibc to both {' and '.join(sorted(suites))}")
    return suites.pop() if suites else None


def merge_rate(variants: list[Variant], labels: list[str]) -> int | None:
    """The arrival rate of one variant per axis; two axes setting two rates is an error."""
    rates = {v.rate for v in variants if v.rate is not None}
    if len(rates) > 1:
        raise ValueError(f"variants {labels} set rate to both {' and '.join(map(str, sorted(rates)))}")
    return rates.pop() if rates else None


def merge_switches(variants: list[Variant], labels: list[str]) -> dict[str, bool]:
    """`aslr` and `prewarm` as the variants of one combination set them (unset keys are left
    out: the experiment's own apply); two axes that set one differently is an error."""
    out = {}
    for key in ("aslr", "prewarm"):
        values = {getattr(v, key) for v in variants} - {None}
        if len(values) > 1:
            raise ValueError(f"variants {labels} set {key} to both true and false")
        out.update({key: values.pop()} if values else {})
    return out


def merge_client(variants: list[Variant], labels: list[str]) -> tuple[str | None, dict[str, str], str | None]:
    """The client's preload, env and library of one variant per axis; two axes setting one
    of them differently is an error."""
    env: dict[str, str] = {}
    single: dict[str, str | None] = {"client_preload": None, "client_library": None}
    for variant in variants:
        for key in single:
            value = getattr(variant, key)
            if value is not None and single[key] not in (None, value):
                raise ValueError(f"variants {labels} set {key} twice ({single[key]}, {value})")
            single[key] = value if value is not None else single[key]
        for key, val in variant.client_env.items():
            if key in env and env[key] != val:
                raise ValueError(f"variants {labels} set client_env.{key} to both {env[key]!r} and {val!r}")
            env[key] = val
    return single["client_preload"], env, single["client_library"]
