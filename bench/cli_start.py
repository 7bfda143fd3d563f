"""What a `perflab` command costs before it does anything: the CPU of its start (imports), the
current code against an older commit's, in the same run.

Why: every command pays it (`perflab export`, `report`, `compare`, a run's start), and `make test`
runs hundreds of them side by side on 2 vCPUs: its parallel phase is bound by CPU (100% busy on
2026-11-30, python 39% of it). asyncssh and cryptography were imported by every command
(hosts/transport.py, hosts/hostkeys.py at module level); they are now imported when a host is
reached. Measured 2026-11-30 (6 runs a side, other_cpu_cores 0.007): `--help` 1.238 -> 1.087 s of
CPU (new/old 0.878, pairs 0.80-1.04), `docs` 1.296 -> 1.041 s (0.803, 0.73-0.92). The rest of a
start is numpy, scipy.special, rich, pydantic and perflab's own models.

With --run, also a whole small run (RUN below: 2 sequential cells of 1 s + 2 s, paced at 200
transactions a second, 1,000 rows): its fixed costs, that every `perflab run` pays, the server's and the
client's included (they are perflab's children). Measured 2026-11-30 against 3a02aa0 (4 runs a side,
ad hoc before this option: 3.43 -> 3.30 CPU-s): a run asked mariadbd's --version four times and collected
the host's tool versions twice (places.proc.per_binary keeps those answers a process).

What: `python -m perflab --help` and `python -m perflab docs` (a command that reads nothing), each
--runs times per side, alternated old/new so drift falls on both; CPU is the child's user + system
time (resource.getrusage of the children). Prints each side's median CPU per command and the
ratio new/old with its range over the runs.

Run: python3 bench/cli_start.py                # 10 runs a side against --old (default 9dcd6e6), ~1 min
     python3 bench/cli_start.py --runs 3       # smoke
     python3 bench/cli_start.py --old 3a02aa0 --runs 6 --run   # and a small run: ~3 min more
Exit status: 0 when it measured, 1 on a real error.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import _common as C

ROOT = Path(__file__).resolve().parent.parent
OLD = "9dcd6e6"  # the last commit before the lazy asyncssh import
COMMANDS = (["--help"], ["docs"])
RUN = """
[experiment]
name = "cli-start-run"
design = "sequential"
duration = "2s"
warmup = "1s"
repeats = 1

[dataset]
tables = 1
table_size = 1000

[workload]
test = "oltp_point_select"
threads = [1]
rate = 200

[server_options]
innodb_log_file_size = "32M"

[variants.general_log]
OFF = {}
ON = { server_options = { general_log = "ON" } }
"""


def cpu_s(checkout: Path, args: list[str]) -> float:
    """The CPU (user + system) of one `python -m perflab ARGS` run from `checkout`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-m", "perflab", *args], cwd=checkout, capture_output=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise C.BenchError(f"{checkout.name}: perflab {' '.join(args)} exited {done.returncode}: {done.stderr[-500:]!r}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--old", default=OLD, help="the commit to compare with (default: %(default)s)")
    parser.add_argument("--run", action="store_true", help="also a whole small run (RUN)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cli-start-") as tmp:
        commands = list(COMMANDS)
        if args.run:
            (Path(tmp) / "run.toml").write_text(RUN, encoding="utf-8")
            commands.append(["run", str(Path(tmp) / "run.toml"), "-o", "{out}", "--history", "off"])
        checkout = Path(tmp) / "old"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(checkout), args.old],
                       check=True, capture_output=True)  # fmt: skip
        try:
            rows, found = [], {}
            start = C.cpu_mark()
            for command in commands:
                name = " ".join(command[:1] if command[0] == "run" else command)
                old, new = [], []
                for n in range(args.runs):
                    for side in (("old", "new") if n % 2 == 0 else ("new", "old")):
                        out = str(Path(tmp) / f"out-{name}-{side}-{n}")  # a run's results, new each time
                        argv = [out if a == "{out}" else a for a in command]
                        (old if side == "old" else new).append(cpu_s(checkout if side == "old" else ROOT, argv))
                ratios = [b / a for a, b in zip(old, new, strict=True)]
                found[name] = {"old_s": old, "new_s": new}
                rows.append([name, f"{statistics.median(old):.3f}", f"{statistics.median(new):.3f}",
                             f"{statistics.median(new) / statistics.median(old):.3f}",
                             f"{min(ratios):.3f}-{max(ratios):.3f}"])  # fmt: skip
            other = C.foreign_cores(start, C.cpu_mark())  # everything but this bench and its children
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(checkout)], check=False)
    C.say(C.table(["command", f"old ({args.old}) CPU s", "new CPU s", "new/old (medians)", "pairs' range"], rows))
    C.say(f"other_cpu_cores: {other:.3f}" if other is not None else "other_cpu_cores: not read")
    C.final_json({"bench": "cli_start", "old": args.old, "runs": args.runs, "cpu_s": found, "other_cpu_cores": other})


if __name__ == "__main__":
    C.main_guard(main)
