"""`aslr` and `prewarm` (issue 12 item 7): from [experiment] or a variant into each cell, the
launcher that turns randomization off, how the running server's personality is read, and the
statements the MariaDB prewarm sends. The real servers: tests/integration/test_switches_real_servers.py."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from perflab import spec
from perflab.errors import SpecError
from perflab.servers import mysqld_dataset
from perflab.servers import kind
from perflab.servers.home import HereHome
from perflab.servers.managed import Managed

HEAD = '[experiment]\nname = "t"\n'


def cells(text: str) -> dict[str, tuple[bool, bool]]:
    return {c.variant_key: (c.aslr, c.prewarm) for c in spec.parse(text, "t.toml").cells() if c.repeat == 1}


def test_defaults_keep_randomization_and_no_prewarm() -> None:
    assert cells(HEAD + "[variants.a]\nx = {}\n") == {"a=x": (True, False)}


def test_the_experiment_sets_every_cell_and_a_variant_overrides_it() -> None:
    text = HEAD + "aslr = false\nprewarm = true\n[variants.a]\nx = {}\ny = { aslr = true, prewarm = false }\n"
    assert cells(text) == {"a=x": (False, True), "a=y": (True, False)}


def test_two_axes_that_disagree_are_refused() -> None:
    text = HEAD + "[variants.a]\nx = { aslr = false }\n[variants.b]\ny = { aslr = true }\n"
    with pytest.raises(SpecError) as info:
        spec.parse(text, "t.toml")
    assert "aslr to both true and false" in info.value.problems[0].render()


@pytest.mark.parametrize("value", ['"off"', "0"])
def test_a_switch_is_a_boolean(value: str) -> None:
    with pytest.raises(SpecError) as info:
        spec.parse(HEAD + f"[variants.a]\nx = {{ prewarm = {value} }}\n", "t.toml")
    assert info.value.problems[0].path == "variants.a.x.prewarm"


class _Process(Managed):
    def __init__(self, pid: int, aslr: bool = True) -> None:
        self._pid, self.aslr, self.home = pid, aslr, HereHome(Path("/nonexistent"))

    @property
    def pid(self) -> int:
        return self._pid


def test_the_launcher_is_setarch_only_without_randomization() -> None:
    assert _Process(1).launched(["mariadbd", "--x"]) == ["mariadbd", "--x"]
    assert _Process(1, aslr=False).launched(["mariadbd"]) == ["setarch", "-R", "mariadbd"]


def test_the_personality_of_a_real_process_says_whether_it_is_randomized() -> None:
    seen = {}
    for aslr in (True, False):
        argv = _Process(0, aslr).launched(["sleep", "5"])
        with subprocess.Popen(argv) as child:
            time.sleep(0.2)  # setarch has exec'd sleep by then
            seen[aslr] = _Process(child.pid).aslr_seen()
            child.kill()
    assert seen == {True: True, False: False}
    assert _Process(2**22 + 12345).aslr_seen() is None  # no such process


def test_prewarm_scans_every_index_with_quoted_names() -> None:
    listing = "sbtest1\tPRIMARY\nsbtest1\tk_1\nodd`name\tPRIMARY\n\nbroken line\n"
    assert mysqld_dataset.scans(listing) == [
        "SELECT COUNT(*) FROM sbtest.`sbtest1` FORCE INDEX (`PRIMARY`)",
        "SELECT COUNT(*) FROM sbtest.`sbtest1` FORCE INDEX (`k_1`)",
        "SELECT COUNT(*) FROM sbtest.`odd``name` FORCE INDEX (`PRIMARY`)",
    ]


def test_prewarm_turns_innodbs_own_reload_off_on_mariadb_only() -> None:
    cell = next(c for c in spec.parse(HEAD + "prewarm = true\n", "t.toml").cells())
    assert kind("mariadb").cell_options(cell) == {"innodb_buffer_pool_load_at_startup": "OFF"}
    assert kind("postgresql").cell_options(cell) == {}
    plain = next(c for c in spec.parse(HEAD, "t.toml").cells())
    assert kind("mariadb").cell_options(plain) == {}


def test_the_docs_name_both_switches() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "experiment.md").read_text(encoding="utf-8")
    assert "aslr = false" in docs and "prewarm = true" in docs
