"""pmp with tool = "eu-stack" on a real mariadbd here (observers/pmp_loop.py: the same loop that runs on
a host, on this machine's place): every tick stamped, put on this machine's clock and cut into the
warm-up and the window as the libdw sampler's are, each tick holding every server thread's stack."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from perflab.store import folded
from tests.conftest import perflab
from tests.integration.helpers import write_experiment

SPEC = """
[experiment]
name = "it-eu-stack"
duration = "3s"
warmup = "1s"
repeats = 1

[dataset]
tables = 1
table_size = 2000

[workload]
test = "oltp_point_select"
threads = [2]

[observe]
pmp = { interval = "0.25s", tool = "eu-stack", warmup = true }
"""


def test_eu_stack_samples_every_thread_at_every_tick_in_both_phases(tmp_path: Path) -> None:
    out = tmp_path / "results"
    done = perflab("run", str(write_experiment(tmp_path / "eu.toml", SPEC)), "-o", str(out))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (cell,) = json.loads(perflab("export", str(out), "--format", "json").stdout)["cells"]
    refs = {p["phase"]: p for p in cell["profiles"] if p["source"] == "pmp"}
    assert {"warmup", "measured"} <= set(refs) and refs["measured"]["call_graph"] == "eu-stack", refs
    window = refs["measured"]
    assert 2.5 <= window["seconds"] <= 3.5 and 0.8 * cell["summary"]["transactions"] <= window["transactions"]
    ticks: dict[str, list[str]] = {}
    for line in (out / window["path"]).with_suffix(".timed").read_text().splitlines():
        t, rest = line.split(" ", 1)  # `<t> <stack> <count>`, a frame may hold a space
        ticks.setdefault(t, []).append(rest.rsplit(" ", 1)[0])
    # a tick every 0.25 s, or every eu-stack call when one takes longer (a loaded machine: ci25, 0.43 s; stop 60,
    # 0.55 s: 4 ticks in 3 s), never two at once, and ticking from the window's start to its end at that cadence
    times = sorted(float(t) for t in ticks)
    gaps = [b - a for a, b in zip(times, times[1:])]
    cadence = max(0.25, statistics.median(gaps))
    assert 3 <= len(times) <= 14 and min(gaps) >= 0.2 and cadence <= 1.0, times
    assert times[0] <= cadence + 0.5 and times[-1] >= window["seconds"] - 2 * cadence - 0.5, (times, window["seconds"])
    sizes = {len(rows) for rows in ticks.values()}
    assert min(sizes) >= 5, sizes  # every thread of mariadbd, each tick (InnoDB's own and the two connections')
    stacks = folded.read(out / window["path"])
    assert any("handle_one_connection" in s or "do_handle_one_connection" in s for s in stacks), list(stacks)[:5]
    assert all(float(t) <= window["seconds"] + 0.05 for t in ticks), sorted(ticks)  # on this machine's clock
