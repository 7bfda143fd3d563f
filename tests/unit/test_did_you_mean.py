"""A misspelled key or allocator of the experiment file is answered with the name meant
(errors.did_you_mean over the schema's keys at that place, spec/problems.keys_at); the
sysbench test's is tests/integration/test_check_names.py's, the server options' too."""

from __future__ import annotations

import pytest

from perflab import spec
from perflab.errors import SpecError, did_you_mean

HEAD = '[experiment]\nname = "t"\n[workload]\ntest = "oltp_read_only"\nthreads = [1]\n'


def problems(text: str) -> dict[str, str | None]:
    with pytest.raises(SpecError) as caught:
        spec.parse(text)
    return {p.path: p.hint for p in caught.value.problems}


@pytest.mark.parametrize(
    ("text", "path", "meant"),
    [
        (HEAD.replace('name = "t"', 'name = "t"\nduraton = "10s"'), "experiment.duraton", "duration"),
        (HEAD + "[dataset]\ntabls = 3\n", "dataset.tabls", "tables"),
        (HEAD + "optoins = {}\n", "workload.optoins", "options"),
        (HEAD + '[variants.a]\nx = {}\ny = { server_option = { a = 1 } }\n', "variants.a.y.server_option",
         "server_options"),  # fmt: skip
        (HEAD + '[observe]\npmp = { intervl = "1s" }\n', "observe.pmp.intervl", "interval"),
        (HEAD + '[builds.b]\npackage = "mariadb-server-core=1:10.11.18-0+deb12u1"\ncompilr = "gcc-12"\n',
         "builds.b.compilr", "compiler"),  # fmt: skip
        (HEAD + "[experimnt]\n", "experimnt", "experiment"),
        (HEAD + '[variants.a]\nx = {}\ny = { preload = "jemaloc" }\n', "variants.a.y.preload", "jemalloc"),
    ],
)
def test_a_misspelled_name_is_answered_with_the_name_meant(text: str, path: str, meant: str):
    hint = problems(text)[path]
    assert hint is not None and hint.startswith(f"did you mean {meant}")


def test_a_key_like_none_keeps_the_plain_hint():
    hint = problems(HEAD + "zzzzqqq = 1\n")["workload.zzzzqqq"]
    assert hint is not None and "did you mean" not in hint and "spelling" in hint


def test_did_you_mean():
    assert did_you_mean("duraton", ["duration", "warmup"]) == "did you mean duration?"
    assert did_you_mean("xyz", ["duration"], "check it") == "check it"
