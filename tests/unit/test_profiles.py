"""Profiles: perf-script and eu-stack parsers, the resident sampler's output, folding, the
folded format, per-transaction normalisation, diffs with noise floors, flame outputs and
the validation of [observe]. Golden results are in tests/data/profiles/expected.json
(tests/data/regen_profiles.py); the other assertions hold whatever the recording."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest

from perflab import spec
from perflab.analyze.profile import Merged, Profile
from perflab.analyze.profile_diff import diff
from perflab.analyze.profile_select import parse_selector
from perflab.errors import SpecError, ToolMissingError, UsageError
from perflab.report import flame
from perflab.observers.elf import FunctionStarts, inspect
from perflab.observers.perf_script import FoldStats, fold_perf_script
from perflab.observers.pmp import ModuleMap, fold_rows, parse_eu_stack, strip_params
from perflab.observers.profilers import stack_quality
from perflab.store import folded
from tests.conftest import inferno_path
from tests.unit import profile_golden as golden

EXPECTED = json.loads((golden.DATA / "expected.json").read_text(encoding="utf-8"))


# ----------------------------------------------------------------------------- golden


@pytest.mark.parametrize("key", sorted(golden.recordings()["perf"]))
def test_perf_script_fold_matches_golden(key: str) -> None:
    stacks, stats = golden.fold_perf(key)
    want = EXPECTED["perf"][key]
    assert {k: v for k, v in vars(stats).items() if k != "dsos"} == want["stats"]
    assert len(stacks) == want["unique_stacks"]
    assert golden.folded_digest(stacks) == want["digest"]
    top = sorted(stacks.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    assert [[s, c] for s, c in top] == want["top"]


@pytest.mark.parametrize("key", sorted(golden.recordings()["perf"]))
def test_perf_script_fold_facts(key: str) -> None:
    """What holds for any recording: every sample folded, kernel frames marked, no bare hex,
    static functions of the stripped mariadbd named by their start."""
    stacks, stats = golden.fold_perf(key)
    lines = golden.perf_text(key)
    headers = sum(1 for ln in lines if ln.strip() and not ln.startswith("\t"))
    assert stats.samples == headers == sum(stacks.values())
    frames = [f for s in stacks for f in s.split(";")]
    kernel_lines = sum(1 for ln in lines if "[kernel.kallsyms]" in ln)
    assert kernel_lines > 0 and any(f.endswith("_[k]") for f in frames)
    assert not any(f.startswith("0x") or f.isalnum() and all(c in "0123456789abcdef" for c in f) for f in frames)
    assert any(f.startswith("mariadbd+0x") for f in frames)
    assert stats.dsos.get("start_thread") == "libc.so.6"
    assert stats.complete <= stats.samples and stats.complete > stats.samples / 2


def test_eu_stack_parse_matches_golden() -> None:
    threads = golden.eu_stack_threads()
    assert [[tid, frames] for tid, frames in threads] == EXPECTED["eu_stack"]
    text = (golden.DATA / "eu_stack.txt").read_text(encoding="utf-8")
    assert len(threads) == text.count("\nTID ") + text.startswith("TID ")
    main_thread = next(frames for _, frames in threads if "mysqld_main" in frames)
    assert main_thread[0] == "_start" and main_thread[-1] == "__poll"  # root first, no "(int, char**)"


def test_sampler_output_folds_to_golden() -> None:
    stacks, timed, stats = golden.sampler_fold()
    want = EXPECTED["pmp_sampler"]
    assert dict(sorted(stacks.items())) == want["stacks"]
    assert stats.samples == want["samples"] == len(timed) == want["timed_rows"]
    frames = {f for s in stacks for f in s.split(";")}
    assert "do_command" in frames or "mysqld_main" in frames  # demangled, without parameters
    assert not any(f.startswith("_Z") for f in frames)
    assert stats.dsos.get("__futex_abstimed_wait_common") == "libc.so.6"


def test_diff_of_recorded_profiles_matches_golden_and_finds_the_hash() -> None:
    rows = diff(golden.perf_profiles("order"), golden.perf_profiles("distinct")).rows(limit=15, by="self")
    from perflab.analyze.profile import round_row

    assert [round_row({k: v for k, v in r.items() if k != "callers"}) for r in rows] == EXPECTED[
        "diff_order_to_distinct"
    ]
    top = rows[0]
    assert top["function"].startswith("my_hash_sort_simple")
    assert top["a_self_per_txn"] == 0 and top["delta_self_per_txn"] > 0 and top["significant"]
    assert top["callers"] and top["callers"][0]["delta_total_per_txn"] > 0


# ----------------------------------------------------------------------------- parsers, small cases


def test_perf_frame_naming_cases() -> None:
    starts = lambda path: FunctionStarts("mariadbd", [0x1000, 0x2000])  # noqa: E731
    text = (
        "mariadbd 42\n"
        "\t          2010 [unknown] (/usr/sbin/mariadbd)\n"
        "\t          1fff my;odd (/usr/sbin/mariadbd)\n"
        "\tffffffff81000130 entry_SYSCALL_64 ([kernel.kallsyms])\n"
        "\t          deadbeef [unknown] ([unknown])\n"
        "\n"
        "mariadbd 43\n"
        "\t          891f5 start_thread (/usr/lib/x86_64-linux-gnu/libc.so.6)\n"
    )
    stacks, stats = fold_perf_script(text.splitlines(keepends=True), starts)
    assert stacks == Counter({"[unknown];entry_SYSCALL_64_[k];my:odd;mariadbd+0x2000": 1, "start_thread": 1})
    assert (stats.samples, stats.complete, stats.frames, stats.unnamed_frames, stats.unknown_frames) == (2, 1, 5, 1, 1)
    assert stats.dsos["mariadbd+0x2000"] == "mariadbd" and stats.dsos["entry_SYSCALL_64_[k]"] == "[kernel]"


def test_strip_params() -> None:
    assert strip_params("mysqld_main(int, char**)") == "mysqld_main"
    assert strip_params("std::function<void ()>::operator()") == "std::function<void ()>::operator()"
    assert strip_params("f(g(int))") == "f"
    assert strip_params("plain") == "plain"


def test_module_map_names_by_function_start() -> None:
    maps = (
        "5600-5700 r--p 00000000 fe:00 1 /usr/sbin/mariadbd\n"
        "5700-5800 r-xp 00001000 fe:00 1 /usr/sbin/mariadbd\n"
        "7f00-7f10 r-xp 00000000 00:00 0 [vdso]\n"
    )
    mm = ModuleMap(maps, lambda p: FunctionStarts("mariadbd", [0x100, 0x180]))
    assert mm.name(0x5600 + 0x190, "/usr/sbin/mariadbd") == "mariadbd+0x180"
    assert mm.name(0x10, "/nowhere.so") == "[unknown]"


def test_eu_stack_frames_without_symbol_or_module() -> None:
    text = "PID 1 - process\nTID 7:\n#0  0x0000000000005790 - /usr/sbin/mariadbd\n#1  0x0000000000000010\n"
    mm = ModuleMap(
        "5600-5800 r-xp 00000000 fe:00 1 /usr/sbin/mariadbd\n", lambda p: FunctionStarts("mariadbd", [0x100, 0x180])
    )
    dsos: dict[str, str] = {}
    assert parse_eu_stack(text, mm, dsos) == [(7, ["[unknown]", "mariadbd+0x180"])]
    assert dsos == {"mariadbd+0x180": "mariadbd"}


def test_fold_rows_counts_and_marks() -> None:
    rows = [
        (0.0, 1, ["start_thread", "_Z10do_commandP3THDb", "__poll"]),
        (0.2, 1, ["io_wq_worker_[k]"]),
        (0.2, 2, ["start_thread", "mariadbd+0x10"]),
    ]
    stacks, timed, stats = fold_rows(rows)
    assert stacks["start_thread;do_command;__poll"] == 1
    assert [t for t, _, _ in timed] == [0.0, 0.2, 0.2]
    assert (stats.samples, stats.complete, stats.unnamed_frames) == (3, 2, 1)


# ----------------------------------------------------------------------------- storage


def test_folded_roundtrip_and_time_cut(tmp_path: Path) -> None:
    stacks = Counter({"a;b": 3, "a;c d(int)": 2})  # a space inside a frame survives
    base = folded.base(tmp_path, 7, "pmp")
    path = folded.write(base, stacks, {"transactions": 10}, [(0.5, "a;b", 1), (1.5, "a;b", 2), (2.5, "a;c d(int)", 2)])
    assert path.name == "cell-0007.pmp.folded"
    assert folded.read(path) == stacks
    meta = folded.read_meta(path)
    assert meta["format"] == "perflab-folded/1" and meta["samples"] == 5 and meta["transactions"] == 10
    assert folded.read_timed(path, 1.0, 2.0) == Counter({"a;b": 2})
    assert folded.read_timed(path, start=2.0) == Counter({"a;c d(int)": 2})
    assert path.read_text().splitlines() == ["a;b 3", "a;c d(int) 2"]  # FlameGraph's format, as is


# ----------------------------------------------------------------------------- normalisation and diff


def _profile(stacks: dict[str, int], txn: float) -> Profile:
    return Profile.from_stacks(Counter(stacks), transactions=txn, sample_us=1e6 / 100)


def test_self_and_total_per_transaction() -> None:
    p = _profile({"main;work;hash": 30, "main;work": 10, "main;rec;rec;leaf": 5}, txn=100)
    rows = {r["function"]: r for r in Merged([p]).rows()}
    assert rows["hash"]["self_per_txn"] == pytest.approx(0.30) and rows["hash"]["total_per_txn"] == pytest.approx(0.30)
    assert rows["work"]["self_per_txn"] == pytest.approx(0.10) and rows["work"]["total_per_txn"] == pytest.approx(0.40)
    assert rows["rec"]["total_per_txn"] == pytest.approx(0.05)  # recursion counted once per stack
    assert rows["main"]["total_per_txn"] == pytest.approx(0.45)
    assert rows["hash"]["self_us_per_txn"] == pytest.approx(0.30 * 10_000)  # 100 Hz: 10 ms a sample
    assert sum(r["self_per_txn"] for r in rows.values()) * 100 == pytest.approx(45)  # every sample once


def test_merge_weighs_repeats_equally_per_transaction() -> None:
    # the same cost per transaction at different speeds: per-txn figures agree, raw counts do not
    fast, slow = _profile({"a;hash": 200}, txn=1000), _profile({"a;hash": 100}, txn=500)
    row = next(r for r in Merged([fast, slow]).rows() if r["function"] == "hash")
    assert row["self_per_txn"] == pytest.approx(0.2) and row["self_per_txn_min"] == row["self_per_txn_max"]
    assert row["repeats"] == 2 and row["self_samples"] == 300


def test_diff_normalises_and_ranks() -> None:
    a = Merged([_profile({"q;sort": 100, "q;send": 100}, 1000), _profile({"q;sort": 110, "q;send": 95}, 1000)])
    b = Merged(
        [
            _profile({"q;sort": 50, "q;send": 50, "q;tmp;hash": 200}, 500),
            _profile({"q;sort": 56, "q;send": 52, "q;tmp;hash": 190}, 500),
        ]
    )
    rows = {r["function"]: r for r in diff(a, b).rows(limit=None)}
    hash_row = rows["hash"]
    assert hash_row["a_self_per_txn"] == 0 and hash_row["b_self_per_txn"] == pytest.approx(0.39)
    assert hash_row["delta_self_per_txn"] == pytest.approx(0.39) and hash_row["significant"]
    assert hash_row["delta_self_us_per_txn"] == pytest.approx(0.39 * 10_000)
    assert rows["q"]["delta_total_per_txn"] == pytest.approx(0.39 + 0.003 + 0.0015 + 0.0, abs=0.01)
    # same cost per transaction at half the speed: no change, within the noise
    assert abs(rows["send"]["delta_self_per_txn"]) < rows["send"]["noise_self_per_txn"]
    assert not rows["send"]["significant"]
    assert diff(a, b).rows(limit=1)[0]["function"] == "hash"
    assert hash_row["callers"] == [{"caller": "tmp", "delta_total_per_txn": pytest.approx(0.39)}]


def test_noise_floor_grows_with_spread_between_repeats() -> None:
    steady = Merged([_profile({"f": 1000}, 10000), _profile({"f": 1000}, 10000), _profile({"f": 1000}, 10000)])
    jumpy = Merged([_profile({"f": 500}, 10000), _profile({"f": 1500}, 10000), _profile({"f": 1000}, 10000)])
    other = Merged([_profile({"f": 1200}, 10000), _profile({"f": 1200}, 10000), _profile({"f": 1200}, 10000)])
    calm = diff(steady, other).rows()[0]
    noisy = diff(jumpy, other).rows()[0]
    assert calm["delta_self_per_txn"] == pytest.approx(noisy["delta_self_per_txn"])
    assert noisy["noise_self_per_txn"] > 2 * calm["noise_self_per_txn"]
    assert calm["significant"] and not noisy["significant"]
    # one repeat each: only sampling noise is known (Poisson), still a floor
    single = diff(Merged([_profile({"f": 100}, 1000)]), Merged([_profile({"f": 120}, 1000)])).rows()[0]
    assert single["noise_self_per_txn"] == pytest.approx(1.959964 * math.sqrt(100 / 1e6 + 120 / 1e6))


def test_diff_json_field_names() -> None:
    row = diff(Merged([_profile({"a": 1}, 10)]), Merged([_profile({"a": 2}, 10)])).rows()[0]
    for name in (
        "function",
        "dso",
        "a_self_per_txn",
        "b_self_per_txn",
        "delta_self_per_txn",
        "a_total_per_txn",
        "b_total_per_txn",
        "delta_total_per_txn",
        "a_self_us_per_txn",
        "delta_total_us_per_txn",
    ):
        assert name in row


# ----------------------------------------------------------------------------- selectors, flame, spec, checks


AXES = {"query": ["order", "distinct"], "allocator": ["glibc", "jemalloc"]}


def test_selectors() -> None:
    assert parse_selector("query=distinct/t2", AXES) == ({"query": "distinct"}, 2)
    assert parse_selector("jemalloc", AXES) == ({"allocator": "jemalloc"}, None)
    for bad, needle in (("quer=x", "no axis"), ("query=x", "no label"), ("nope", "on 0 axes"), ("order/tx", "/t")):
        with pytest.raises(UsageError, match=needle):
            parse_selector(bad, AXES)


def test_speedscope_and_diff_text() -> None:
    scaled = flame.per_million_txn(Counter({"a;b": 3, "a": 1}), transactions=1000)
    assert scaled == Counter({"a;b": 3000, "a": 1000})
    doc = json.loads(flame.speedscope(scaled, "x"))
    frames = [f["name"] for f in doc["shared"]["frames"]]
    prof = doc["profiles"][0]
    assert prof["type"] == "sampled" and sum(prof["weights"]) == pytest.approx(4.0)  # per 1000 transactions
    assert [[frames[i] for i in s] for s in prof["samples"]] == [["a"], ["a", "b"]]
    assert flame.diff_text(Counter({"a": 1}), Counter({"b": 2})) == "a 1 0\nb 0 2\n"


def test_inferno_renders_plain_and_differential_svg() -> None:
    if inferno_path() is None:  # make setup skips inferno without Rust: then the error must say what to do
        with pytest.raises(ToolMissingError, match="inferno-flamegraph not found") as exc:
            flame.svg("a;b 3000\n", "t", "s")
        assert "make setup" in (exc.value.hint or "") and "speedscope" in (exc.value.hint or "")
        return
    plain = flame.svg("a;b 3000\na;c_[k] 1000\n", "t", "s")
    assert plain.lstrip().startswith("<?xml") and ">c</text>" in plain
    assert 'fill="rgb(250,150,0)" fg:x="3000" fg:w="1000"' in plain  # the kernel frame, orange (java palette)
    delta = flame.svg(
        flame.diff_text(Counter({"a;b": 10}), Counter({"a;b": 30, "a;c": 5})), "t", "s", differential=True
    )
    assert "<svg" in delta and "rgb(" in delta


HEAD = '[experiment]\nname = "x"\n'


def test_observe_spec() -> None:
    obs = spec.parse(
        HEAD + '[observe]\nperf = { frequency = 199, call_graph = "dwarf" }\npmp = { interval = "200ms" }\n'
    ).file.observe
    assert obs.perf.frequency == 199 and obs.perf.call_graph == "dwarf" and obs.pmp.interval == 0.2
    assert spec.parse(HEAD + "[observe]\nperf = true\n").file.observe.perf.frequency == 99
    assert spec.parse(HEAD).file.observe.perf is None
    with pytest.raises(SpecError) as exc:
        spec.parse(HEAD + '[observe]\nperf = { frequency = 0, call_graph = "lbr" }\npmp = { interval = "1ms" }\n')
    paths = [p.path for p in exc.value.problems]
    assert paths == ["observe.perf.frequency", "observe.perf.call_graph", "observe.pmp.interval"]


def test_variant_workload_options() -> None:
    exp = spec.parse(
        HEAD + "[workload]\noptions = { order_ranges = 0 }\n[variants.q]\n"
        "o = { workload_options = { order_ranges = 1 } }\nd = { workload_options = { distinct_ranges = 1 } }\n"
    )
    cells = exp.cells()
    assert [c.workload_options for c in cells[:2]] == [{"order_ranges": 1}, {"distinct_ranges": 1}]
    with pytest.raises(SpecError, match="variants.q.o.workload_options.threads"):
        spec.parse(HEAD + "[variants.q]\no = { workload_options = { threads = 2 } }\n")


def test_missing_profilers_are_validation_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    exp = spec.parse(HEAD + '[observe]\nperf = {}\npmp = { tool = "eu-stack" }\n')
    from perflab.observers import checks

    monkeypatch.setattr(checks, "which", lambda name: None)
    problems = checks.profiler_problems(exp.file.observe)
    by_path = {p.path: p for p in problems}
    assert "linux-perf" in by_path["observe.perf"].hint
    assert "elfutils" in by_path["observe.pmp.tool"].hint
    assert any("binutils" in (p.hint or "") for p in problems)


def test_perf_permission_check_runs_perf_here() -> None:
    from perflab.observers import checks

    assert checks.perf_problems() == []  # root on this machine: system-wide cpu-clock works


def test_stack_quality_states_stripped_binary_and_fp() -> None:
    stats = FoldStats(samples=100, complete=60, frames=1000, unnamed_frames=250)
    q = stack_quality("/usr/sbin/mariadbd", "perf", "fp", stats)
    info = inspect("/usr/sbin/mariadbd")
    assert q["stacks_complete_pct"] == 60.0 and q["unnamed_frames_pct"] == 25.0
    problems = " ".join(n["problem"] for n in q["notes"])
    remedies = " ".join(n["remedy"] for n in q["notes"])
    if not info.symtab and not info.debug_info:
        assert "stripped" in problems and "dbgsym" in remedies
    if (info.fp_fraction or 0) < 0.9:
        assert (
            "frame pointer" in problems and 'call_graph = "dwarf"' in remedies and "-fno-omit-frame-pointer" in remedies
        )
    assert q["notes"], "Debian's mariadbd is stripped and built without frame pointers"


def test_function_starts_of_the_installed_server() -> None:
    info = inspect("/usr/sbin/mariadbd")
    starts = FunctionStarts.load("/usr/sbin/mariadbd")
    assert info.eh_frame_functions == len(starts.starts) > info.dynsym_functions > 1000
    assert starts.starts == sorted(starts.starts)
    first = starts.starts[100]
    assert starts.name(first + 3) == f"mariadbd+{hex(first)}"


def test_sampler_output_with_odd_binary_names(tmp_path: Path) -> None:
    from perflab.observers.pmp import StackSampler

    out = tmp_path / "pmp.txt"
    out.write_text(
        "# pmp_sampler pid=1 interval=0.2\n0.000 7 start_thread;x+0x10\n0.000 8 [no user stack]\n"
        "#dso x+0x10 x (deleted)\n#dso start_thread libc.so.6\n"
    )
    sampler = StackSampler(1, tmp_path)
    sampler.out = out
    stacks, _, stats = sampler.fold()
    assert stacks == Counter({"start_thread;x+0x10": 1, "[no user stack]": 1})
    assert stats.dsos == {"x+0x10": "x (deleted)", "start_thread": "libc.so.6"}


def test_sampler_hold_time_is_reported(tmp_path: Path) -> None:
    from perflab.observers.pmp import StackSampler

    out = tmp_path / "pmp.txt"
    out.write_text(
        "# pmp_sampler pid=1 interval=1.0\n#stat 0.000 13 3.000 3.500\n0.000 7 start_thread;f\n"
        "#stat 1.000 13 5.000 5.500\n1.000 7 start_thread;f\n"
    )
    sampler = StackSampler(1, tmp_path, interval=1.0)
    sampler.out, sampler.seconds = out, 2.0
    sampler.fold()
    assert sampler.cost() == {"samples": 2, "held_ms_per_s": 4.0, "held_ms_per_sample": 4.0, "sample_ms_mean": 4.5}
