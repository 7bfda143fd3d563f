"""Checks for many client threads (1024 on 2 vCPUs), before anything starts.

One socket per thread on each side and one server thread per connection: what limits a high
thread count here is not the CPUs but the process limits (file descriptors; threads, for users
other than root) and the server's connection limit (its kind's `connection_problems`: MariaDB's
max_connections, servers/mysql_protocol.py). perflab raises its soft limits to the hard ones (the
server and the client inherit them) and reports what is still short, as preflight Problems:

    concurrency_problems(exp)  -> [Problem("workload.threads", "an open-files limit of at least 2048 ...", ...)]
"""

from __future__ import annotations

import os
import resource

from perflab.errors import Problem
from perflab.spec.matrix import Experiment

FD_MARGIN = 1024  # beyond one socket per thread: the server's tables, logs, table cache; sysbench's own
NPROC_MARGIN = 512  # beyond one thread per connection on each side: the server's own threads, perflab's


def raise_limit(which: int) -> tuple[int, int]:
    """The soft limit raised to the hard one (children inherit it: mariadbd, sysbench); (soft, hard)."""
    soft, hard = resource.getrlimit(which)
    if soft != hard:
        try:
            resource.setrlimit(which, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft, hard


def _short_of(limit: int, need: int) -> bool:
    return limit != resource.RLIM_INFINITY and limit < need


def concurrency_problems(exp: Experiment) -> list[Problem]:
    """File descriptors and threads for the largest thread count, after raising the soft limits."""
    threads = max(exp.file.workload.threads)
    problems = []
    soft, hard = raise_limit(resource.RLIMIT_NOFILE)
    if _short_of(soft, threads + FD_MARGIN):
        problems.append(
            Problem(
                "workload.threads",
                f"an open-files limit of at least {threads + FD_MARGIN} for {threads} threads "
                "(a socket per thread in sysbench and in mariadbd, whose open_files_limit it also caps)",
                f"ulimit -n {soft} (hard {hard})",
                "raise the hard limit: `ulimit -Hn 65536` as root before perflab, LimitNOFILE=65536 in a "
                "systemd unit, `docker run --ulimit nofile=65536`; or fewer threads",
            )
        )
    if os.geteuid() != 0:  # root is not held to RLIMIT_NPROC
        soft, hard = raise_limit(resource.RLIMIT_NPROC)
        if _short_of(soft, 2 * threads + NPROC_MARGIN):
            problems.append(
                Problem(
                    "workload.threads",
                    f"a process/thread limit of at least {2 * threads + NPROC_MARGIN} for {threads} threads "
                    "(sysbench's and the server's threads count for the same user)",
                    f"ulimit -u {soft} (hard {hard})",
                    "raise it (`ulimit -Hu`, LimitNPROC=), run as root, or fewer threads",
                )
            )
    return problems
