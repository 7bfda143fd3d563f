"""Time to a correct verdict: adaptive repeats vs a fixed 3 x 60 s protocol; false positives.

What: two variants with a real difference of a few percent: the baseline server, and the
same server with one option that costs a little throughput (`--option NAME=VALUE`; the
default, DEFAULT_OPTION, was measured here to cost a few percent). Measured:
  1. the fixed protocol: `repeats = 3`, 60 s windows, the verdict of `perflab compare`, and
     the wall time of the whole `perflab run` (dataset preparation included);
  2. the adaptive protocol: `repeats = "auto"`, 10 s windows, `target_ci = "2%"`,
     `max_repeats = 10`: its wall time and its verdict, which is correct when it equals the
     fixed protocol's (the fixed protocol's own verdict is the reference; if it is neither
     faster nor slower, the truth is unknown and the script says so);
  3. the false-positive rate: N adaptive runs of two *identical* variants, counting `faster`
     or `slower` verdicts (at 95%, about 5% is expected by design).
The figure: adaptive wall time / fixed wall time for the same correct verdict.

How: through the CLI exactly as a user runs it (`perflab run`, `perflab compare --format
json`), one results directory per run under a temporary directory. Every run prepares the
same small dataset (2 tables x 50k rows, about 1 s), so both protocols pay the same set-up.

Run: python3 bench/time_to_verdict.py            # the figures we quote (~20 minutes)
     python3 bench/time_to_verdict.py --quick    # smoke test (~3 minutes): short windows, 1 FP run
Exit status: 0 when it measured, 1 on a real error.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common as C

ROOT = Path(__file__).resolve().parent.parent
# A server option with a small, real cost on oltp_read_only: measured on this VM (see the
# closing note of the change that added this script).
DEFAULT_OPTION = "performance_schema=ON"

EXPERIMENT = """\
[experiment]
name = "{name}"
duration = "{duration}s"
{repeats}
[dataset]
tables = 2
table_size = 50000

[workload]
test = "oltp_read_only"
threads = [2]
options = {{ rand_type = "uniform" }}

[variants.server]
base = {{}}
{other} = {{ server_options = {{ {option} }} }}
"""


def toml_option(option: str) -> str:
    name, sep, value = option.partition("=")
    if not sep or not name:
        raise C.BenchError(f"--option {option!r}: write it as NAME=VALUE")
    return f'{name} = "{value}"' if value else f"{name} = {value!r}"


def run_protocol(tmp: Path, name: str, repeats: str, duration: int, option: str, other: str) -> dict[str, Any]:
    """One `perflab run` + `perflab compare`: wall time, verdict, ratio, repeats used."""
    spec = tmp / f"{name}.toml"
    spec.write_text(
        EXPERIMENT.format(name=name, duration=duration, repeats=repeats, option=toml_option(option), other=other),
        encoding="utf-8",
    )
    out = tmp / name
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "perflab", "run", str(spec), "-o", str(out)], capture_output=True, text=True, cwd=ROOT
    )
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise C.BenchError(
            f"perflab run {name} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        )
    compared = subprocess.run(
        [sys.executable, "-m", "perflab", "compare", str(out), "--format", "json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    (row,) = [r for r in json.loads(compared.stdout) if r["kind"] == "variant"]
    doc = json.loads(
        subprocess.run(
            [sys.executable, "-m", "perflab", "export", str(out)], capture_output=True, text=True, cwd=ROOT, check=True
        ).stdout
    )
    busy = max((c["resources"] or {}).get("other_cpu_cores") or 0 for c in doc["cells"] if c["status"] == "ok")
    return {
        "name": name,
        "wall_s": round(wall, 1),
        "verdict": row["verdict"],
        "ratio": C.rnd(row["ratio"]),
        "ci": [C.rnd(row["ci_low"]), C.rnd(row["ci_high"])],
        "repeats": [row["n_baseline"], row["n_variant"]],
        "cells": len(doc["cells"]),
        "stop": (doc.get("adaptive") or {}).get("stop_reason"),
        "max_other_cpu_cores": busy,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="short windows, one false-positive run")
    parser.add_argument("--option", default=DEFAULT_OPTION, help="server option of the slower variant, NAME=VALUE")
    parser.add_argument("--fp-runs", type=int, default=None, help="adaptive runs of identical variants (default 4)")
    args = parser.parse_args()
    fixed_s, auto_s = (8, 3) if args.quick else (60, 10)
    fp_runs = args.fp_runs if args.fp_runs is not None else (1 if args.quick else 4)
    adaptive = 'repeats = "auto"\ntarget_ci = "2%"\nmax_repeats = 10\nmax_warmup = "5s"\n'
    fixed = 'repeats = 3\nwarmup = "5s"\n'
    machine = C.Machine()
    rows = []
    with tempfile.TemporaryDirectory(prefix="plbench-ttv-") as results:
        tmpdir = Path(results)
        C.say(f"option under test: {args.option}; fixed 3 x {fixed_s} s vs adaptive {auto_s} s windows")
        rows.append(run_protocol(tmpdir, "fixed", fixed, fixed_s, args.option, "other"))
        C.say(f"fixed:    {rows[-1]}")
        rows.append(run_protocol(tmpdir, "adaptive", adaptive, auto_s, args.option, "other"))
        C.say(f"adaptive: {rows[-1]}")
        for i in range(fp_runs):
            # the "other" variant sets an option to its default value: identical servers
            rows.append(run_protocol(tmpdir, f"identical-{i + 1}", adaptive, auto_s, "sort_buffer_size=2M", "same"))
            C.say(f"identical {i + 1}: {rows[-1]}")
    info = machine.finish()
    fixed_row, auto_row, fp_rows = rows[0], rows[1], rows[2:]
    truth = fixed_row["verdict"]
    known = truth in ("faster", "slower")
    correct = auto_row["verdict"] == truth if known else None
    false_pos = sum(1 for r in fp_rows if r["verdict"] in ("faster", "slower"))
    C.say()
    C.say(
        C.table(
            ["run", "wall s", "cells", "verdict", "ratio", "95% CI", "repeats", "stop", "other cores"],
            [
                [
                    r["name"],
                    r["wall_s"],
                    r["cells"],
                    r["verdict"],
                    r["ratio"],
                    f"{r['ci'][0]}-{r['ci'][1]}",
                    "/".join(map(str, r["repeats"])),
                    r["stop"] or "-",
                    r["max_other_cpu_cores"],
                ]
                for r in rows
            ],
        )
    )
    C.say()
    C.say(C.Machine.describe(info))
    speed = auto_row["wall_s"] / fixed_row["wall_s"]
    if not known:
        C.say(
            f"the fixed protocol found no significant difference for {args.option}: the truth is unknown; "
            "choose an option with a larger cost (--option)"
        )
    C.say(
        f"adaptive / fixed wall time: {speed:.3f} ({auto_row['wall_s']:.0f} s vs {fixed_row['wall_s']:.0f} s); "
        f"adaptive verdict {'correct' if correct else 'WRONG' if correct is False else 'unverifiable'}; "
        f"false positives {false_pos} of {len(fp_rows)} identical-variant runs"
    )
    C.final_json(
        {
            "bench": "time_to_verdict",
            "option": args.option,
            "quick": args.quick,
            "time_ratio": round(speed, 3),
            "adaptive_correct": correct,
            "false_positives": false_pos,
            "identical_runs": len(fp_rows),
            "runs": rows,
            "machine": info,
        }
    )


if __name__ == "__main__":
    C.main_guard(main)
