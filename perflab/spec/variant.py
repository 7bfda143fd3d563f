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

    @field_validator("env", "client_env")
    @classmethod
    def _env(cls, value: dict[str, Any]) -> dict[str, str]:
        return {k: str(v) for k, v in value.items()}


Axes = dict[
    Annotated[str, AfterValidator(check_axis_name)],
    Annotated[dict[Annotated[str, AfterValidator(check_label)], "Variant"], AfterValidator(check_non_empty_axis)],
]
