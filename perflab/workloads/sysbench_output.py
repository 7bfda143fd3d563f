"""sysbench's output: its per-second lines, final summary and latency histogram.

Input (sysbench 1.0.20 `run --report-interval=1 --histogram=on --percentile=95`):
    [ 1s ] thds: 2 tps: 6180.24 qps: 98910.71 (r/w/o: 86548.24/0.00/12362.47) lat (ms,95%): 0.37 err/s: 0.00 ...
followed by a latency histogram ("value |*** count") and the "SQL statistics" summary.
Output: Interval and Summary dataclasses; p50/p99 come from the histogram.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import asdict, dataclass, replace
from typing import Any

_INTERVAL = re.compile(
    r"^\[\s*(?P<t>\d+)s\s*\]\s+thds:\s*(?P<thds>\d+)\s+tps:\s*(?P<tps>[\d.]+)\s+qps:\s*(?P<qps>[\d.]+)\s+"
    r"\(r/w/o:\s*(?P<r>[\d.]+)/(?P<w>[\d.]+)/(?P<o>[\d.]+)\)\s+"
    r"lat\s+\(ms,(?P<pct>[\d.]+)%\):\s*(?P<lat>[\d.]+)\s+err/s:\s*(?P<err>[\d.]+)\s+reconn/s:\s*(?P<reconn>[\d.]+)"
)
# with --rate: its target in the header, and after each second's report the events still queued
_TARGET = re.compile(r"^Target transaction rate: (\d+)/sec", re.MULTILINE)
_QUEUE = re.compile(r"^\[\s*(?P<t>\d+)s\s*\]\s+queue length:\s*(?P<queue>\d+),?\s+concurrency:\s*(?P<conc>\d+)")
_OVERFLOW = "The event queue is full"
_REPORT = re.compile(r"^\[\s*\d+s\s*\]")  # a per-second report's line, of any kind
SERVICE_NOTE = (
    "sysbench 1.0.20 adds each event's queue time to its latency and does not report the service time alone"
)
_HIST_ROW = re.compile(r"^\s*(?P<value>[\d.]+)\s+\|\**\s+(?P<count>\d+)\s*$")


@dataclass(frozen=True)
class Interval:
    t: int  # seconds since the start of this sysbench run
    threads: int
    tps: float
    qps: float
    reads: float
    writes: float
    other: float
    p95_ms: float
    errors_per_s: float
    reconnects_per_s: float


@dataclass(frozen=True)
class Summary:
    transactions: int
    queries: int
    tps: float
    qps: float
    errors: int
    errors_per_s: float
    reconnects: int
    total_time_s: float
    latency_ms: dict[str, float | None]  # min avg max p50 p95 p99
    # at a fixed arrival rate (workloads/rate.py): the target, each second's achieved rate and
    # backlog, whether the cell kept it, and where its latency counts from; None: a closed loop
    rate: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if out["rate"] is None:  # a closed loop's summary keeps the shape it always had
            out.pop("rate")
        return out


def parse_intervals(text: str) -> list[Interval]:
    """sysbench's per-second reports, one per second of the run (see one_per_second)."""
    out = []
    for line in text.splitlines():
        m = _INTERVAL.match(line)
        if m:
            out.append(
                Interval(
                    t=int(m["t"]),
                    threads=int(m["thds"]),
                    tps=float(m["tps"]),
                    qps=float(m["qps"]),
                    reads=float(m["r"]),
                    writes=float(m["w"]),
                    other=float(m["o"]),
                    p95_ms=float(m["lat"]),
                    errors_per_s=float(m["err"]),
                    reconnects_per_s=float(m["reconn"]),
                )
            )
    return one_per_second(out)


RATES = ("tps", "qps", "reads", "writes", "other", "errors_per_s", "reconnects_per_s")
LATE_AT = 0.25  # a late report (its label shared with the on-time one after it) was printed in [t - 0.5, t)


def one_per_second(reports: list[Interval]) -> list[Interval]:
    """One interval per second from 1 to the last report's, each second's rates those of the reports
    that cover it, weighted by how much of it each covers. sysbench's reporter wakes at each whole
    second, and a report's rates are over all the time since the report before (sysbench.c
    report_intermediate: its counters and its timer since the last report), labelled with the time
    rounded to the second. On a loaded machine the reporter wakes late: the report due at 5 s,
    printed at 5.6 s, says "[ 6s ]", and so does the next, on time, which covers only the rest of
    that second (the late one is taken at t - LATE_AT); a reporter that cannot run for more than a
    second skips the seconds it missed (measured: sysbench stopped for 2.6 s, its next report's rate
    was over the 2.9 s since the last), so that report stands for each of them. Counting the
    seconds so, their transactions add up to the client's; a missed second as no report (before
    2026-11-30) lost its transactions, and an on-time report after a late one, counted for a whole
    second, counted a catch-up burst of a tenth of a second ten times over."""
    late = [a.t == b.t for a, b in zip(reports, reports[1:])] + [False]
    times = [r.t - LATE_AT if shares else float(r.t) for r, shares in zip(reports, late)]
    spans: list[tuple[float, float, Interval]] = []
    for report, end in zip(reports, times):
        begin = spans[-1][1] if spans else 0.0
        if end > begin:  # a third report of one label would cover nothing: passed over
            spans.append((begin, end, report))
    out: list[Interval] = []
    first = 0  # the first span that ends after the second before (spans are contiguous, in order)
    for second in range(1, math.floor(spans[-1][1]) + 1 if spans else 1):
        while spans[first][1] <= second - 1:
            first += 1
        parts = []
        for a, b, r in itertools.takewhile(lambda span: span[0] < second, itertools.islice(spans, first, None)):
            parts.append((min(second, b) - max(second - 1, a), r))
        weight = sum(w for w, _ in parts)
        rates = {name: round(sum(w * getattr(r, name) for w, r in parts) / weight, 2) for name in RATES}
        out.append(replace(max(parts, key=lambda part: part[0])[1], t=second, **rates))
    return out


def parse_histogram(text: str) -> list[tuple[float, int]]:
    """(latency_ms, count) rows of the `--histogram=on` block. A per-second report line inside it is
    passed over: sysbench's last report races the end of its run and can land between two rows."""
    rows: list[tuple[float, int]] = []
    inside = False
    for line in text.splitlines():
        if line.startswith("Latency histogram"):
            inside = True
            continue
        if inside and _REPORT.match(line):
            continue
        if inside:
            m = _HIST_ROW.match(line)
            if m:
                rows.append((float(m["value"]), int(m["count"])))
            elif rows:
                break
    return rows


def histogram_percentile(rows: list[tuple[float, int]], pct: float) -> float | None:
    """The smallest bucket value at or above `pct` percent of events, as sysbench computes it
    (sb_histogram.c: the first bucket where the running count reaches floor(n * pct / 100 + 0.5))."""
    total = sum(c for _, c in rows)
    if not total:
        return None
    need = math.floor(total * pct / 100.0 + 0.5)
    seen = 0
    for value, count in rows:
        seen += count
        if seen >= need:
            return value
    return rows[-1][0]


def _number(pattern: str, text: str, cast: type = float) -> Any:
    m = re.search(pattern, text, re.MULTILINE)
    return cast(m.group(1)) if m else None


def parse_summary(text: str) -> Summary | None:
    """The final statistics block; None if sysbench did not get that far.

    With --report-checkpoints, earlier "Checkpoint report" blocks come first; the last block
    covers only the time since the last checkpoint, but its "total time" counts from the
    start, so the window's length is derived from its own events and rate."""
    if "SQL statistics:" not in text:
        return None
    hist = parse_histogram(text)
    text = text[text.rindex("SQL statistics:") :]
    total_time = _number(r"^\s+total time:\s+([\d.]+)s", text) or 0.0
    window_tps = _number(r"^\s+transactions:\s+\d+\s+\(([\d.]+) per sec", text)
    window_txn = _number(r"^\s+transactions:\s+(\d+)", text, int)
    if window_tps and window_txn:
        total_time = round(window_txn / window_tps, 4)
    errors = _number(r"^\s+ignored errors:\s+(\d+)", text, int) or 0
    return Summary(
        transactions=_number(r"^\s+transactions:\s+(\d+)", text, int) or 0,
        queries=_number(r"^\s+queries:\s+(\d+)", text, int) or 0,
        tps=_number(r"^\s+transactions:\s+\d+\s+\(([\d.]+) per sec", text) or 0.0,
        qps=_number(r"^\s+queries:\s+\d+\s+\(([\d.]+) per sec", text) or 0.0,
        errors=errors,
        errors_per_s=errors / total_time if total_time else 0.0,
        reconnects=_number(r"^\s+reconnects:\s+(\d+)", text, int) or 0,
        total_time_s=total_time,
        latency_ms={
            "min": _number(r"^\s+min:\s+([\d.]+)", text),
            "avg": _number(r"^\s+avg:\s+([\d.]+)", text),
            "max": _number(r"^\s+max:\s+([\d.]+)", text),
            "p50": histogram_percentile(hist, 50),
            # from the histogram like p50/p99 (sysbench prints the same figure rounded to 0.01 ms,
            # which could otherwise put p95 above p99)
            "p95": histogram_percentile(hist, 95) or _number(r"^\s+95th percentile:\s+([\d.]+)", text),
            "p99": histogram_percentile(hist, 99),
        },
    )


def overflow(text: str) -> str | None:
    """Why a --rate run ended at once: its event queue filled up (sysbench then prints FATAL, stops
    its workers and exits 1 without a summary); None when it did not."""
    from perflab.workloads import rate

    target = _TARGET.search(text)
    if _OVERFLOW not in text or target is None:
        return None
    return (
        f"sysbench could not keep the rate of {int(target.group(1)):,}/s: its event queue "
        f"({rate.SYSBENCH_QUEUE:,} events) filled up and it stopped (\"{_OVERFLOW}\")"
    )


def parse_rate(text: str, warmup: int) -> dict[str, Any] | None:
    """The rate record of a `--rate` run's measured window (seconds after `warmup`): each second's
    achieved rate (its tps) and backlog (events queued, in seconds of arrivals); None without --rate."""
    from perflab.workloads import rate

    target = _TARGET.search(text)
    if target is None:
        return None
    goal = int(target.group(1))
    queued = {int(m["t"]): int(m["queue"]) for m in map(_QUEUE.match, text.splitlines()) if m}
    seconds = [
        (iv.t, iv.tps, round(queued[iv.t] / goal, 3) if iv.t in queued else None)
        for iv in parse_intervals(text)
        if iv.t > warmup
    ]
    return rate.record(goal, seconds, rate.INTENDED, None, SERVICE_NOTE)
