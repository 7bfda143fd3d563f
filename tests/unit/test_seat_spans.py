"""A seat's profile phases (observers/seats.py): cut by the wall clock, counted in the seat's
own running seconds and transactions, as the seats of a group share the wall clock."""

from __future__ import annotations

from pathlib import Path

import pytest

from perflab.observers.phases import CONNECT, MEASURED, STALL, WARMUP
from perflab.observers.seats import SeatSpans


def spans() -> SeatSpans:
    # the group's warm-up 100-112 s, its window 112-160 s on the wall clock; this seat's client ran
    # 3 s of the warm-up (1,500 transactions) and 12 s of the window (9,000 transactions)
    return SeatSpans(workload=100.0, window=112.0, end=160.0, own={WARMUP: (3.0, 1500.0), MEASURED: (12.0, 9000.0)})


def test_a_phase_the_recording_covered_counts_the_seats_own_seconds_and_transactions():
    s = spans()
    whole = (99.0, 161.0)
    assert s.seconds(MEASURED, whole) == 12.0 and s.transactions(MEASURED, whole) == 9000.0
    assert s.seconds(WARMUP, whole) == 3.0 and s.transactions(WARMUP, whole) == 1500.0


def test_a_recording_that_covered_part_of_a_phase_gets_that_share():
    s = spans()
    half = (136.0, 170.0)  # the window's second half
    assert s.seconds(MEASURED, half) == pytest.approx(6.0) and s.transactions(MEASURED, half) == pytest.approx(4500.0)
    assert s.seconds(WARMUP, half) == 0.0 and s.transactions(WARMUP, half) == 0.0


def test_samples_are_cut_by_the_wall_clock_and_only_into_warm_up_and_window():
    s = spans()
    assert s.phases_at(105.0) == (WARMUP,) and s.phases_at(130.0) == (MEASURED,)
    assert s.phases_at(99.0) == () and s.phases_at(160.0) == ()
    s.stalls, s.started = [(120.0, 125.0)], 95.0  # seconds of running time are not wall seconds
    assert s.ranges(STALL) == [] and s.ranges(CONNECT) == [] and s.phases_at(122.0) == (MEASURED,)


def test_a_seat_with_no_warm_up_has_no_warm_up_profile():
    s = SeatSpans(workload=112.0, window=112.0, end=160.0, own={MEASURED: (12.0, 9000.0)})
    assert s.ranges(WARMUP) == [] and s.seconds(WARMUP, (100.0, 170.0)) == 0.0


def test_the_seats_recording_is_made_and_removed_where_their_servers_run() -> None:
    """With the servers on a host, the group's perf records there (its site: place, directory, clock),
    its times put on this machine's clock by the host's clock read when the window ends, and its
    directory there removed after the group (a perf.data per group would fill the host's tmpfs)."""
    from types import SimpleNamespace

    from perflab.observers.seats import SeatObservers
    from perflab.places import Done, Site
    from perflab.spec.observe import ObserveSection

    ran: list[list[str]] = []
    place = SimpleNamespace(run=lambda argv, timeout=60.0: ran.append(argv) or Done(0, "", ""))
    clock = SimpleNamespace(finish=lambda: ran.append(["clock finish"]))
    site = Site(place, Path("/r/group-0003"), clock, own_dir=True)  # type: ignore[arg-type]  (a host's: host_site)
    group = SeatObservers(ObserveSection.model_validate({"perf": True}), Path("/local/group-0003"), site)
    group.perf = SimpleNamespace(enabled=True)  # type: ignore[assignment]  (recording: started there)
    group.window_ended()
    group.remove()
    assert ran == [["clock finish"], ["rm", "-rf", "--one-file-system", "/r/group-0003"]]
    assert SeatObservers(ObserveSection(), Path("/local/g")).site.dir == Path("/local/g")  # here: the work directory
