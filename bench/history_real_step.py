"""History on real runs: a nightly series of one small experiment with a step in the middle
(general_log turned on), and what `perflab history` makes of it night by night.

What: RUNS_BEFORE runs of a point-select experiment (one variant, 2 threads, a few rounds each), then
RUNS_AFTER runs of the same file with `[server_options] general_log = "ON"`, each a real `perflab
run` recording itself into a throwaway history index (--history). After every run from the step
on, `perflab history NAME --format json` and `--fail-on slower:3%` are asked, as a nightly job
would. Printed:
  - the step's size (the change point's ratio and interval; the segments' levels);
  - the detection delay: runs after the step until a change point within 3 runs of it is reported
    (goal: within 4), and the night the gate first exits 4;
  - false change points: those reported before the step, on any night;
  - whether the change point names `config.server_options.general_log: None -> ON` as what changed;
  - Apache Otava 0.8.0 (window 50, p 0.001; in the venv bench/history_detection.py makes) on the
    same runs' means, for comparison.
Every figure comes from real servers on this machine: run it on an idle machine, under the lock.

Run: flock /work/measure.lock python3 bench/history_real_step.py            # ~30 runs, ~25 minutes
     flock /work/measure.lock python3 bench/history_real_step.py --quick    # 6 + 4 runs of 1 round, ~6 min
Exit status: 0 when it measured (goal met or not), 1 on a real error.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import _common as C
import history_detection as H  # Otava's venv and its script

NAME = "history-real-step"
NEAR = 3
FILE = """
[experiment]
name = "{name}"
duration = "{duration}s"
max_warmup = "3s"
repeats = {repeats}

[dataset]
tables = 2
table_size = 20000

[workload]
test = "oltp_point_select"
threads = [2]
{options}"""


def settings(quick: bool) -> dict[str, Any]:
    if quick:
        return {"before": 6, "after": 4, "repeats": 2, "duration": 5}
    return {"before": 20, "after": 10, "repeats": 3, "duration": 8}


def night(i: int, cfg: dict[str, Any], tmp: Path, index: str) -> Path:
    """Run i: general_log ON from run `before` on; recorded in `index`."""
    on = i >= cfg["before"]
    toml = tmp / f"night{i:02d}.toml"
    options = '\n[server_options]\ngeneral_log = "ON"\n' if on else ""
    toml.write_text(FILE.format(name=NAME, options=options, **cfg), encoding="utf-8")
    out = tmp / f"night{i:02d}"
    stdout = C.cli("run", str(toml), "-o", str(out), "--seed", str(i), "--history", index)
    if "history: recorded in" not in stdout:
        raise C.BenchError(f"run {i} was not recorded in the history index:\n{stdout[-2000:]}")
    return out


def ask(index: str) -> tuple[dict[str, Any], int]:
    """(the history as JSON, the gate's exit code)."""
    doc = json.loads(C.cli("history", NAME, "--history", index, "--format", "json"))
    root = Path(__file__).resolve().parent.parent
    gate = subprocess.run(
        [sys.executable, "-m", "perflab", "history", NAME, "--history", index, "--fail-on", "slower:3%"],
        capture_output=True, text=True, check=False, cwd=root,
    )  # fmt: skip
    if gate.returncode not in (0, 4):
        raise C.BenchError(f"the gate exited {gate.returncode}: {gate.stderr[-2000:]}")
    return doc, gate.returncode


def otava(means: list[float]) -> list[int] | None:
    """Otava 0.8.0's change points (indices) on these means, or None without its venv."""
    python = H.otava_python()
    if python is None:
        return None
    jobs = [{"series": means, "window": 50, "p": 0.001}]
    done = subprocess.run([str(python), "-c", H.OTAVA_SCRIPT], input=json.dumps(jobs), capture_output=True,
                          text=True, check=True)  # fmt: skip
    return json.loads(done.stdout)[0]


def measure(quick: bool) -> None:
    cfg = settings(quick)
    step = cfg["before"]
    detected = gate_night = None
    false: set[int] = set()
    with C.workdir() as tmp:
        index = str(tmp / "history.sqlite")
        doc: dict[str, Any] = {}
        for i in range(step + cfg["after"]):
            night(i, cfg, tmp, index)
            if i < 3:
                continue
            doc, code = ask(index)
            found = [c["run"] - 1 for c in doc["series"][0]["change_points"]]
            false |= {k for k in found if abs(k - step) > NEAR}
            if detected is None and any(abs(k - step) <= NEAR for k in found):
                detected = i - step + 1
            if gate_night is None and i >= step and code == 4:
                gate_night = i - step + 1
            C.say(f"run {i + 1}: change points at runs {[k + 1 for k in found]}, gate exit {code}")
        report(doc, step, detected, gate_night, false)


def report(doc: dict[str, Any], step: int, detected: int | None, gate_night: int | None, false: set[int]) -> None:
    (series,) = doc["series"]
    means = [r["mean"] for r in series["runs"]]
    near = [c for c in series["change_points"] if abs(c["run"] - 1 - step) <= NEAR]
    named = bool(near) and any(
        p["field"] == "config.server_options.general_log"
        for p in near[0]["provenance"] + near[0].get("provenance_nearby", [])  # across it, or within 3 runs
    )
    found_otava = otava(means)
    rows = [
        ["step (perflab's change point)", f"{near[0]['ratio']:.3f} [{near[0]['low']:.3f}-{near[0]['high']:.3f}]" if near else "not found"],
        ["segments", "; ".join(f"runs {g['first_run']}-{g['last_run']}: {g['level']:,.0f}" for g in series["segments"])],
        ["run-to-run variation (tau)", f"{series['tau']:.2%}"],
        ["detection delay (runs after the step)", detected],
        ["gate (slower:3%) first exit 4, runs after the step", gate_night],
        ["false change points (any night)", len(false)],
        ["names general_log as what changed", named],
        ["otava 0.8.0 (window 50, p 0.001) change points", None if found_otava is None else [k + 1 for k in found_otava]],
    ]  # fmt: skip
    C.say(C.table(["figure", "value"], rows))
    C.final_json({"step_run": step + 1, "delay": detected, "gate_night": gate_night, "false": sorted(false),
                  "named": named, "otava": found_otava, "series": series})  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="6 + 4 runs of 2 rounds: a smoke test")
    args = parser.parse_args()
    C.main_guard(lambda: measure(args.quick))


if __name__ == "__main__":
    main()
