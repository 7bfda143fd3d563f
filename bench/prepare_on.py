"""Where a server host's dataset is cheaper to prepare (issue 36, docs/hosts.md, `prepare_on`): on the
host itself (its mariadb-install-db and mariadbd, sysbench prepare from here over TCP) or here (this
machine's server, its snapshot packed, sent over SFTP and unpacked there), on a real SSH host in a
network namespace of this machine (tests/integration/sshhosts.py).

What: one MariaDB experiment with `server_host` (tables = 2, table_size = 100,000: about 50 MB; one
1 s cell), run R times each way in alternating order. Per run: its wall time from `perflab run` to its
exit (the cell and everything else the same both ways, so the difference is the dataset's), and the
dataset record's prepare_s (for "here" without the copy, which comes at the first cell's restore).
other_cpu_cores: the machine's busy cores over 3 s of idle before each run (/proc/stat).
Run (root, idle machine, under the measurement lock):
     flock /work/measure.lock python3 bench/prepare_on.py           # ~3 minutes
     flock /work/measure.lock python3 bench/prepare_on.py --quick   # smoke test: table_size 5,000
Exit status: 0 when it measured, 1 on a real error.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's perflab, and tests/integration

import _common as C

from perflab.hosts.target import CONFIG_ENV
from perflab.observers.resources import machine_busy_s
from tests.integration.sshhosts import SshLab, ssh_hosts

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENT = """
[experiment]
name = "prepare-on"
duration = "1s"
warmup = 0
repeats = 1
server_host = "db"
prepare_on = "{where}"
[hosts.db]
ssh = "{ssh}"
[dataset]
tables = 2
table_size = {table_size}
[workload]
test = "oltp_point_select"
threads = [2]
[variants.v]
one = {{}}
"""


def idle_cores(seconds: float = 3.0) -> float:
    """The machine's busy cores while this bench waits (what else runs), from /proc/stat."""
    before, started = machine_busy_s(), time.monotonic()
    time.sleep(seconds)
    return (machine_busy_s() - before) / (time.monotonic() - started)


def one_run(lab: SshLab, tmp: Path, where: str, table_size: int, i: int) -> dict[str, Any]:
    spec, out = tmp / f"run-{i}.toml", tmp / f"results-{i}"
    spec.write_text(EXPERIMENT.format(where=where, ssh=lab.hosts["db"].ssh, table_size=table_size))
    other = idle_cores()
    env = {**os.environ, **lab.env()}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "perflab", "run", str(spec), "-o", str(out)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=1800, check=False)  # fmt: skip
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise RuntimeError(
            f"perflab run ({where}) exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    exported = subprocess.run([sys.executable, "-m", "perflab", "export", str(out), "--format", "json"], env=env,
                              cwd=ROOT, capture_output=True, text=True, check=True)  # fmt: skip
    meta = json.loads(exported.stdout)
    (record,) = meta["datasets"].values()
    return {"where": where, "wall_s": round(wall, 2), "prepare_s": round(record["prepare_s"], 2),
            "data_bytes": record["data_bytes"], "other_cpu_cores": round(other, 3)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke test: a small dataset, one run each way")
    parser.add_argument("--runs", type=int, default=3, help="runs each way (default 3)")
    args = parser.parse_args()
    table_size, runs = (5000, 1) if args.quick else (100_000, args.runs)
    if os.geteuid() != 0:
        raise SystemExit("error: root is needed (network namespaces, sshd)")

    def run() -> None:
        with tempfile.TemporaryDirectory(prefix="plbench-prepare-") as tmp, ssh_hosts(Path(tmp), ["db"]) as lab:
            os.environ[CONFIG_ENV] = str(lab.config)
            rows = []
            for i in range(runs):
                order = ("host", "here") if i % 2 == 0 else ("here", "host")  # a drift falls on both alike
                rows += [one_run(lab, Path(tmp), where, table_size, 2 * i + j) for j, where in enumerate(order)]
        found = {}
        for where in ("host", "here"):
            mine = [r for r in rows if r["where"] == where]
            found[where] = {
                k: C.rnd(C.mean([r[k] for r in mine]), 3) for k in ("wall_s", "prepare_s", "other_cpu_cores")
            }
        C.say(C.table(["prepare_on", "run wall s", "prepare_s", "other_cpu_cores"],
                      [[w, f["wall_s"], f["prepare_s"], f["other_cpu_cores"]] for w, f in found.items()]))  # fmt: skip
        C.say(f"dataset {rows[0]['data_bytes'] >> 20} MiB; runs each way: {runs}")
        C.final_json(
            {"bench": "prepare_on", "quick": args.quick, "table_size": table_size, "found": found, "runs": rows}
        )

    C.main_guard(run)


if __name__ == "__main__":
    main()
