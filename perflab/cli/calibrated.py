"""Planning a run with this machine's calibration (`perflab calibrate`): which calibration
file matches the experiment, and what it changes.

With repeats = "auto", the first min_repeats rounds become the rounds the calibration says
detect an effect the size of `equivalence_margin` at the file's duration (95% confidence, 80%
power; analyze/power.py), within [min_repeats, max_repeats]; adaptive rounds then go on from
there as before. With fixed repeats nothing changes: the line says what those repeats can
detect. A calibration file found in the cache that does not match (another host, another
workload, another server binary, older than 30 days, corrupt or of an unknown format) is
ignored and the line says why; one given with `--calibration FILE` that does not match is an
error (exit 2). With `[observe] host_speed` and a calibration that measured the canary's slope
(its A/A run had the canary too), that slope goes into meta `calibration.host_speed` and the
verdicts adjust with it, fixed, instead of fitting one on the run's own rounds
(analyze/host_speed.py); the rounds are then planned on the restart noise left after adjusting.
A file that does not set `host_speed` gets the canary when the calibration measured a usable
slope (calibrate runs the canary unless told `host_speed = false`): the run is then planned and
judged on the noise the calibration found it leaves; `host_speed = false` keeps it off.

    plan(exp, None) -> (exp with min_repeats 9, {"used": True, "file": "...", "note": "calibration: using ..."})
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path
from typing import Any

from perflab import hostinfo, spec
from perflab.analyze import host_slope, host_speed, power
from perflab.errors import PerflabError
from perflab.spec.aa import first_configuration
from perflab.store import calibration


def plan(exp: spec.Experiment, explicit: Path | None) -> tuple[spec.Experiment, dict[str, Any]]:
    """(the experiment as the calibration plans it, what was used and why, for meta and --check)."""
    from perflab.cache import cache_root

    host, now = hostinfo.collect(), dt.datetime.now(dt.UTC)
    whash = calibration.workload_hash(
        exp.file.dataset.model_dump(mode="json"), exp.file.workload.model_dump(mode="json")
    )
    directory = cache_root() / "calibration"
    design = exp.file.experiment.design
    assert design is not None  # decided as the file loads (spec/design.choose)
    wanted = explicit is not None or calibration.path_for(directory, host, whash, design).exists()
    server_sha, unknown = calibrated_binary(exp) if wanted else (None, "")  # hashing takes 0.5 s
    doc: dict[str, Any] | None
    if explicit is not None:
        doc = calibration.check(explicit, host, whash, server_sha, now, design, unknown)
        note = f"using {explicit}"
    else:
        doc, note = calibration.find(directory, host, whash, server_sha, now, design, unknown)
    if doc is None:
        return exp, {"used": False, "note": f"calibration: {note}"}
    return apply(exp, doc, note)


def said_before(planned: dict[str, Any]) -> bool:
    """Has this machine been told already that no calibration matched? The line says what
    calibration buys; said at every run, it would be noise. Remembered under the cache
    ($PERFLAB_CACHE/notices/no-calibration); a calibration ignored for a reason is always said."""
    from perflab.cache import cache_root

    if planned.get("used") or calibration.NONE_MATCHED not in planned.get("note", ""):
        return False
    marker = cache_root() / "notices" / "no-calibration"
    if marker.exists():
        return True
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(planned["note"] + "\n", encoding="utf-8")
    except OSError:
        return False  # an unwritable cache: said every time rather than never
    return False


def calibrated_binary(exp: spec.Experiment) -> tuple[str | None, str]:
    """(the sha256 of the server binary that the file's first configuration runs, "") -- the
    configuration `perflab calibrate` measures (spec/aa.py): the installed server of the file's
    `server` (mariadbd or postgres), or the [builds] entry its first variant names -- or (None,
    why it is not known before the builds are made: a source build not made yet)."""
    from perflab.cache import cache_root
    from perflab.builds import resolve as builds

    first, server = first_configuration(exp)["variant"], exp.file.experiment.server
    name = next((cell.build for cell in exp.round(1) if cell.variant == first), None)
    if name is None:
        return builds.installed(server).sha256, ""
    wanted = exp.file.builds[name]
    try:
        found = builds.cached(name, wanted, cache_root(), builds.training_id(exp.file, wanted), server)
    except PerflabError as exc:
        return None, f"build {name!r} cannot be found: {exc.message}"
    if found is None:
        return None, f"build {name!r} is not made yet: not the binary calibrated (`perflab build FILE` makes it)"
    return found.sha256, ""


def apply(exp: spec.Experiment, doc: dict[str, Any], note: str) -> tuple[spec.Experiment, dict[str, Any]]:
    section = exp.file.experiment
    noise = power.Noise(*(float(doc["noise"][k]) for k in calibration.NOISE_KEYS))
    used: dict[str, Any] = {"used": True, "file": doc.get("file"), "created_at": doc["created_at"]}
    slope: dict[str, Any] | None = doc.get("host_speed")
    if (
        not section.interleaved  # its turns take the host's speed out: no canary (spec/design.py)
        and exp.file.observe.host_speed is None
        and slope is not None
        and host_slope.usable_slope(slope) is None
    ):
        exp = updated(exp, "observe", host_speed=True)
        note = f"{note}; [observe] host_speed on, as the calibration measured its slope (host_speed = false: off)"
    if exp.file.observe.host_speed:
        unused = host_slope.usable_slope(slope)
        if unused is None and slope is not None:
            used["host_speed"] = {**slope, "created_at": doc["created_at"]}
            r = slope.get("r", 0)
            note = (
                f"{note}; host-speed slope {slope['slope']:.2f}{host_speed.weighed_in(slope)} (r = {r:.2f}) "
                "fixed for the verdicts"
            )
            if isinstance(slope.get("restart"), int | float) and slope["restart"] >= 0:  # planned on adjusted noise
                noise = dataclasses.replace(noise, restart=float(slope["restart"]))
                if isinstance(slope.get("per_second"), int | float) and slope["per_second"] >= 0:  # since 2026-11-25
                    noise = dataclasses.replace(noise, per_second=float(slope["per_second"]))
        else:
            note = f"{note}; host speed: {unused}, so the run fits its own"
    if not section.adaptive:
        assert isinstance(section.repeats, int)  # fixed repeats: not adaptive
        effect = power.detectable(noise, section.duration, section.repeats)
        what = "too few repeats for a paired interval" if effect is None else f"effects of {effect:.1%} or more"
        return exp, {**used, "note": f"calibration: {note}: {section.repeats} repeats detect {what} (80% power)"}
    need = power.rounds_for(noise, section.duration, section.equivalence_margin, section.max_repeats)
    rounds = min(section.max_repeats, max(section.min_repeats, need or section.max_repeats))
    planned = updated(exp, "experiment", min_repeats=rounds)
    target = f"a {section.equivalence_margin:.0%} effect at {section.duration:.0f} s windows"
    why = f"{need} rounds detect {target}" if need else f"{target} needs more than max_repeats"
    note = f"calibration: {note}: min_repeats {section.min_repeats} -> {rounds} ({why}, 80% power)"
    return planned, {**used, "note": note, "min_repeats": rounds}


def updated(exp: spec.Experiment, section: str, **fields: Any) -> spec.Experiment:
    """`exp` with `fields` of one section of its file (`experiment`, `observe`) changed."""
    changed = getattr(exp.file, section).model_copy(update=fields)
    return dataclasses.replace(exp, file=exp.file.model_copy(update={section: changed}))


def resumed(exp: spec.Experiment, meta: dict[str, Any]) -> spec.Experiment:
    """An interrupted run keeps what its calibration planned (meta `calibration`): its
    min_repeats, and the canary it turned on."""
    used = meta.get("calibration") or {}
    if used.get("host_speed") and exp.file.observe.host_speed is None:
        exp = updated(exp, "observe", host_speed=True)
    rounds = used.get("min_repeats")
    if not rounds or not exp.file.experiment.adaptive:
        return exp
    return updated(exp, "experiment", min_repeats=int(rounds))
