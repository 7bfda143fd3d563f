"""The A/A experiment of `perflab calibrate`: one configuration of an experiment file, run as
two identical variants in randomized blocks, so that every difference between them is noise.

The configuration is the file's first variant (the first label of every axis) at its first
thread count, with its [dataset], [workload], [server_options] and [builds]; the axes keep
only that label, and a new axis `calibrate` (or `calibrate_aa` if the file has one) adds the
identical labels A and B. Observers (perf, pmp, alloc) are left out: they add their own
noise; the host-speed canary is kept unless the file sets `host_speed = false` (or, unset,
there is no C compiler to build it), so that its slope is calibrated too; with design =
"interleaved" there is none (the turns take the host's speed out), and the A/A pair runs
interleaved like the file's rounds. Repeats are the
calibration's rounds; adaptive keys are dropped. The result goes through the normal parser
(spec.parse), so it runs through the same Scheduler and cells as any experiment, and its text
is stored with the results like a file's.

    aa_experiment(load("examples/quick.toml"), rounds=6).cells()[0].key
      -> "allocator=glibc,calibrate=A/t1/r1"
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

from perflab.spec.loading import parse
from perflab.spec.matrix import Experiment

COPIES = ("A", "B")
_ADAPTIVE = ("repeats", "stop", "target_ci", "min_repeats", "max_repeats", "time_budget", "budget", "spending")


def aa_experiment(exp: Experiment, rounds: int) -> Experiment:
    """The A/A experiment of `exp`'s first configuration, `rounds` rounds (module docstring)."""
    raw = exp.raw
    section = {k: v for k, v in raw["experiment"].items() if k not in _ADAPTIVE}
    # the design the file's runs get (spec/design.choose), so the calibration measures that design's noise
    section.update(name=f"{exp.name}-calibrate", repeats=rounds, design=exp.file.experiment.design)
    workload = {**raw.get("workload", {}), "threads": [exp.file.workload.threads[0]]}
    axis = "calibrate_aa" if "calibrate" in exp.file.variants else "calibrate"
    variants = {name: dict([next(iter(labels.items()))]) for name, labels in raw.get("variants", {}).items()}
    variants[axis] = {label: {} for label in COPIES}
    doc = {"experiment": section, "workload": workload, "variants": variants}
    for key in ("dataset", "server_options", "builds", "hosts"):
        if key in raw:
            doc[key] = raw[key]
    # the canary's slope is calibrated too (analyze/host_speed.py); said either way, never left unset
    # no canary in the interleaved design (spec/design.py): its turns take the host's speed out; it
    # runs where the server runs, with a client or a server on another host (observers/beside.py)
    no_canary = exp.file.experiment.interleaved
    doc["observe"] = {"host_speed": False if no_canary else _canary(exp.file.observe.host_speed)}
    return parse(to_toml(doc), f"{exp.source} (A/A calibration of its first configuration)")


def _canary(setting: bool | None) -> bool:
    """Run the canary: when the file asks for it, and when it does not say, if there is a C
    compiler to build it with (cbuild.py; its absence is an error only when asked for)."""
    if setting is None:
        return shutil.which(os.environ.get("CC", "cc")) is not None
    return setting


def first_configuration(exp: Experiment) -> dict[str, Any]:
    """The configuration calibrated: the first variant's labels and the first thread count."""
    return {
        "variant": {name: next(iter(labels)) for name, labels in exp.file.variants.items()},
        "threads": exp.file.workload.threads[0],
    }


def to_toml(doc: dict[str, dict[str, Any]]) -> str:
    """One [section] per top-level key, each value inline (keys quoted: labels may be "2M")."""
    lines = []
    for section, values in doc.items():
        lines.append(f"[{json.dumps(section)}]")
        lines += [f"{json.dumps(key)} = {_value(v)}" for key, v in values.items()]
        lines.append("")
    return "\n".join(lines)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {type(value).__name__}")
