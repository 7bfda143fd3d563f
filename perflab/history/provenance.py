"""What a run ran, for saying which of it changed at a change point.

Input: a results directory's meta (host record, `git` recorded at the run's start) and cells
(build, allocator and client library records). Output: a flat dict of provenance fields, each
a string, grouped by prefix:

    {"package.mariadbd": "10.11.19-MariaDB-0+deb12u1 ...", "package.sysbench": "sysbench 1.0.20",
     "build.installed": "9b44b62ca595", "git.experiment": "4e54fc2 (dirty)",
     "config.file": "8c1d2e3f4a5b", "config.server_options.general_log": "ON",
     "host.fingerprint": "3f0c1a9e", "host.kernel": "6.1.0-28-amd64", ...}

Nothing is measured again here: these are the records `perflab run` already keeps (the host at
the run's start, each cell's server binary with its sha256, the experiment file as run); `git` (the commit of the experiment
file's repository and of each [builds] source tree) is recorded by `perflab run` since history.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import tomllib
from pathlib import Path
from typing import Any

# host fields that identify the machine: a change of any is a change of host fingerprint
HOST_FINGERPRINT = ("hostname", "machine", "cpu_model", "cores", "memory_bytes")
HOST_FIELDS = ("kernel", "glibc")  # shown on their own: they change on one machine
PACKAGE_FIELDS = ("mariadbd", "postgres", "sysbench", "pgbench", "perflab")


def of_run(meta: dict[str, Any], cells: list[dict[str, Any]]) -> dict[str, str]:
    """The run's provenance fields (module docstring)."""
    host = meta.get("host") or {}
    out = {f"package.{k}": str(host[k]) for k in PACKAGE_FIELDS if host.get(k)}
    for cell in cells:
        if cell.get("allocator_version") and cell.get("preload"):
            out[f"package.allocator.{cell['preload']}"] = str(cell["allocator_version"])
        library = (cell.get("client") or {}).get("library_version")
        if library:
            out["package.client_library"] = str(library)
        build = cell.get("build") or {}
        if build.get("sha256"):
            out[f"build.{build.get('name') or 'installed'}"] = str(build["sha256"])[:12]
    for where, state in (meta.get("git") or {}).items():
        if state:
            out[f"git.{where}"] = str(state)
    out.update(_config(meta.get("spec_text")))
    out.update({f"host.{k}": str(host[k]) for k in HOST_FIELDS if host.get(k)})
    if host:
        out["host.fingerprint"] = fingerprint(host)
    return dict(sorted(out.items()))


def _config(spec_text: str | None) -> dict[str, str]:
    """The experiment file's hash, its top-level [server_options] and each variant's, one by one
    (an option turned on between two nights is the likeliest cause of a step)."""
    if not spec_text:
        return {}
    out = {"config.file": hashlib.sha256(spec_text.encode()).hexdigest()[:12]}
    try:
        spec = tomllib.loads(spec_text)
    except tomllib.TOMLDecodeError:
        return out
    out.update({f"config.server_options.{k}": str(v) for k, v in (spec.get("server_options") or {}).items()})
    out.update(_variant_options(spec.get("variants")))
    return out


def _variant_options(variants: Any) -> dict[str, str]:
    """Each variant's own server options, `config.variants.AXIS.LABEL.server_options.NAME`: a
    nightly configuration beside a pinned reference changes here, not at the top level."""
    out = {}
    for axis, labels in (variants if isinstance(variants, dict) else {}).items():
        for label, body in (labels if isinstance(labels, dict) else {}).items():
            options = body.get("server_options") if isinstance(body, dict) else None
            for k, v in (options if isinstance(options, dict) else {}).items():
                out[f"config.variants.{axis}.{label}.server_options.{k}"] = str(v)
    return out


def fingerprint(host: dict[str, Any]) -> str:
    """A short hash of what identifies the machine (HOST_FINGERPRINT), not of what changes on it."""
    text = json.dumps({k: host.get(k) for k in HOST_FINGERPRINT}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def differences(before: dict[str, str], after: dict[str, str]) -> list[dict[str, str | None]]:
    """The fields that differ between two runs' provenance: [{field, before, after}]."""
    return [
        {"field": k, "before": before.get(k), "after": after.get(k)}
        for k in sorted(set(before) | set(after))
        if before.get(k) != after.get(k)
    ]


# what kind of change a field is, by its prefix (first match): the words `perflab history` lists
KINDS = (
    ("config.", "configuration"),
    ("git.experiment", "configuration"),
    ("build.", "build"),
    ("git.build.", "build"),
    ("package.mariadbd", "server version"),
    ("package.postgres", "server version"),
    ("host.fingerprint", "host"),
    ("host.", "host software"),
    ("package.", "package"),
)


def kind_of(name: str) -> str:
    return next((kind for prefix, kind in KINDS if name.startswith(prefix)), "other")


def changes_at(runs: list[Any]) -> list[dict[str, Any]]:
    """Every provenance change between consecutive runs (RunRecords, oldest first), at the run
    where it happened, change point or not: [{run (from 1), started_at, directory, kind, changes}],
    one entry per run and kind."""
    out = []
    for i in range(1, len(runs)):
        by_kind: dict[str, list[dict[str, str | None]]] = {}
        for d in differences(runs[i - 1].provenance, runs[i].provenance):
            by_kind.setdefault(kind_of(str(d["field"])), []).append(d)
        for kind, found in by_kind.items():
            entry = {"run": i + 1, "started_at": runs[i].started_at, "directory": runs[i].directory}
            out.append({**entry, "kind": kind, "changes": found})
    return out


def git_state(directory: Path) -> str | None:
    """`COMMIT` or `COMMIT (dirty)` of the git repository holding `directory`; None outside one
    (or without git)."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(directory), *args], capture_output=True, text=True, timeout=30, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    head = git("rev-parse", "--short=12", "HEAD")
    if not head:
        return None
    return f"{head} (dirty)" if git("status", "--porcelain", "--untracked-files=no") else head


def git_of(experiment_file: Path | None, source_trees: dict[str, str]) -> dict[str, str]:
    """What `perflab run` records as meta `git`: the experiment file's repository, and each
    [builds] entry built from a local source tree."""
    found = {}
    if experiment_file is not None:
        found["experiment"] = git_state(Path(experiment_file).resolve().parent)
    for name, tree in source_trees.items():
        found[f"build.{name}"] = git_state(Path(tree))
    return {k: v for k, v in found.items() if v}
