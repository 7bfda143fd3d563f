"""The dynamic loader's and iconv's variables are perflab's (issue 48): `env` and `client_env` of an
experiment file may not set any LD_* (LD_AUDIT, LD_LIBRARY_PATH, LD_PRELOAD...) or GCONV_PATH, which
load code of the file's choosing into processes perflab runs as root beside its own checks; the
preload is perflab's own (`preload`, `client_preload`). docs/trust-experiment-files.md."""

from __future__ import annotations

import pytest

from perflab import spec
from perflab.errors import SpecError

HEAD = '[experiment]\nname = "t"\n'


@pytest.mark.parametrize(
    "name", ["LD_AUDIT", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_BIND_NOW", "LD_DEBUG_OUTPUT", "GCONV_PATH"]
)
@pytest.mark.parametrize("table", ["env", "client_env"])
def test_loader_variables_are_refused_naming_the_key(name: str, table: str) -> None:
    with pytest.raises(SpecError) as refused:
        spec.parse(HEAD + f'[variants.v]\nx = {{ {table} = {{ {name} = "/tmp/x" }} }}\n', "bad.toml")
    (problem,) = refused.value.problems
    assert problem.path == f"variants.v.x.{table}.{name}"
    assert f"no {name}" in problem.expected and "reserved" in problem.expected
    assert refused.value.exit_code == 2


@pytest.mark.parametrize("name", ["MALLOC_ARENA_MAX", "GLIBC_TUNABLES", "OLD_LD", "LDX", "TZ"])
def test_other_variables_pass(name: str) -> None:
    spec.parse(HEAD + f'[variants.v]\nx = {{ env = {{ {name} = "1" }} }}\n', "ok.toml")
