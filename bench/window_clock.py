"""What aligning a server host's series costs per cell, and how close it is (issue 36, docs/hosts.md
"Clocks"), on a real SSH host in a network namespace of this machine (tests/integration/sshhosts.py).

Each cell whose server runs on a host reads the host's clock at its window's start and end
(hosts/clock.WindowClock: 12 exchanges each, the shortest kept). This times N such pairs, and the
error align() records for each; an exec round trip beside, for scale. Both sides are this machine's
clock, so the true shift is 0: |shift_s| is the real error, shown beside the recorded bound.

Run (root, under the measurement lock):
     flock /work/measure.lock python3 bench/window_clock.py          # ~5 s
Exit status: 0 when it measured.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perflab.hosts.clock import WindowClock
from perflab.hosts.target import parse_target
from perflab.hosts.transport import Connection
from tests.integration.sshhosts import ssh_hosts


def ms(values: list[float]) -> str:
    return f"mean {statistics.mean(values) * 1000:.3f} ms, max {max(values) * 1000:.3f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=30, help="window clocks to take (default 30)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ssh_hosts(Path(tmp), ["db"]) as lab:
        os.environ.update(lab.env())
        link = Connection.open("db", parse_target(lab.hosts["db"].ssh))
        begin, finish, errors, shifts, execs = [], [], [], [], []
        for _ in range(args.n):
            clock = WindowClock(link)
            t0 = time.perf_counter()
            clock.begin()
            t1 = time.perf_counter()
            aligned = clock.finish()
            t2 = time.perf_counter()
            link.run(["true"])
            execs.append(time.perf_counter() - t2)
            assert aligned is not None, clock.refused
            begin.append(t1 - t0)
            finish.append(t2 - t1)
            errors.append(aligned.error_s)
            shifts.append(abs(aligned.shift_s))
        link.close()
    print(f"window clocks: {args.n}")
    print(f"reading at the window's start: {ms(begin)}")
    print(f"reading at its end, and align(): {ms(finish)}")
    print(f"|shift_s| (the real error): {ms(shifts)}; error_s recorded: {ms(errors)}")
    print(f"bounded by error_s: {sum(s <= e for s, e in zip(shifts, errors))} of {args.n}")
    print(f"an exec round trip, for scale: {ms(execs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
