"""perflab calibrate against a real mariadbd and sysbench: A/A rounds of a tiny workload, the
variance components, the saved calibration, and `perflab run --check` planning with it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.conftest import perflab
from tests.integration.helpers import write_experiment

WORKLOAD = """
[experiment]
design = "sequential"  # what this test checks runs one server at a time
name = "it-calibrate"
duration = "2s"
warmup = "1s"
repeats = "auto"
max_repeats = 30

[dataset]
tables = 1
table_size = 2000

[workload]
test = "oltp_read_only"
threads = [1, 2]
options = { range_size = 100, rand_type = "uniform" }

[variants.allocator]
glibc = {}
jemalloc = { preload = "jemalloc" }
"""


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, Path]:
    tmp = tmp_path_factory.mktemp("calibrate")
    toml = write_experiment(tmp / "workload.toml", WORKLOAD)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PERFLAB_CACHE", str(tmp / "cache"))
        done = perflab("calibrate", str(toml), "--rounds", "4", "--budget", "5m", "-o", str(tmp / "aa"),
                       "--format", "json")  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        yield toml, json.loads(done.stdout), tmp


def test_calibration_runs_aa_rounds_and_is_saved(calibrated):
    _, doc, tmp = calibrated
    assert doc["format"] == "perflab-calibration/1" and doc["rounds"] == 4
    assert doc["configuration"] == {"variant": {"allocator": "glibc"}, "threads": 1}
    saved = Path(doc["file"])
    assert saved.parent == tmp / "cache" / "calibration" and saved.name.endswith(f"-{doc['workload_hash']}.json")
    assert json.loads(saved.read_text())["noise"] == doc["noise"]
    names = [c["name"] for c in doc["variance"]["components"]]
    assert names == ["window", "restarts", "drift"]
    assert doc["variance"]["rounds"] >= 3 and doc["variance"]["groups"] == 2
    assert doc["noise"]["per_second"] > 0 and doc["noise"]["overhead"] > 1  # restore + start + warm-up
    plan = doc["plan"]
    assert plan["effect"] is not None and 0 < plan["effect"] < 1
    assert plan["rounds"] * 2 * (doc["noise"]["overhead"] + plan["duration"]) <= 300


def test_aa_results_export_their_variance(calibrated):
    _, doc, _ = calibrated
    exported = perflab("export", doc["results"], "--format", "json")
    assert exported.returncode == 0, exported.stderr
    result = json.loads(exported.stdout)
    assert result["format"] == "perflab-results/10"
    assert {c["variant"]["calibrate"] for c in result["cells"]} == {"A", "B"}
    assert result["variance"]["components"] == doc["variance"]["components"]


def test_run_check_plans_with_the_calibration_or_says_why_not(calibrated):
    toml, doc, tmp = calibrated
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PERFLAB_CACHE", str(tmp / "cache"))
        done = perflab("run", str(toml), "--check", "--format", "json")
        assert done.returncode == 0, done.stderr
        used = json.loads(done.stdout)["calibration"]
        assert used["used"] and used["file"] == doc["file"] and "min_repeats 3 ->" in used["note"]
        stale = json.loads(Path(doc["file"]).read_text())
        stale["created_at"] = "2020-01-01T00:00:00+00:00"
        Path(doc["file"]).write_text(json.dumps(stale))
        done = perflab("run", str(toml), "--check")
        said = " ".join(done.stdout.split())  # wrapped at the terminal's width, which the paths' length moves
        assert done.returncode == 0 and "ignored" in said and "stale after 30" in said, done.stdout
        done = perflab("run", str(toml), "--check", "--calibration", doc["file"])
        assert done.returncode == 2 and "created_at" in done.stderr, done.stderr


PGBENCH = """
[experiment]
design = "sequential"  # what this test checks runs one server at a time
name = "it-calibrate-pg"
server = "postgresql"
duration = "2s"
warmup = "1s"
repeats = "auto"
max_repeats = 30

[dataset]
scale = 1

[workload]
tool = "pgbench"
test = "select-only"
threads = [2]
"""


def test_a_postgresql_calibration_plans_its_runs_and_another_postgres_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The calibration stores the postgres binary it measured, and a run checks that same binary
    (not mariadbd's): used as long as it is the one to run; a file whose first variant runs another
    postgres (a copy with one byte more, as a [builds] basedir) is refused with the reason."""
    monkeypatch.setenv("PERFLAB_CACHE", str(tmp_path / "cache"))
    toml = write_experiment(tmp_path / "pg.toml", PGBENCH)
    done = perflab("calibrate", str(toml), "--rounds", "3", "--budget", "5m", "-o", str(tmp_path / "aa"),
                   "--format", "json")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    installed = Path("/usr/lib/postgresql/15/bin/postgres")
    assert doc["server_sha256"] == hashlib.sha256(installed.read_bytes()).hexdigest()
    checked = perflab("run", str(toml), "--check", "--format", "json")
    assert checked.returncode == 0, checked.stderr
    used = json.loads(checked.stdout)["calibration"]
    assert used["used"] and used["file"] == doc["file"] and "min_repeats 3 ->" in used["note"], used

    other = tmp_path / "other"
    (other / "bin").mkdir(parents=True)
    (other / "bin" / "postgres").write_bytes(installed.read_bytes() + b"\0")  # runs as before; another binary
    (other / "bin" / "postgres").chmod(0o755)
    (other / "bin" / "initdb").symlink_to(installed.parent / "initdb")
    variant = f'\n[builds.other]\nbasedir = "{other}"\n[variants.server]\nother = {{ build = "other" }}\n'
    changed = write_experiment(tmp_path / "pg-other.toml", PGBENCH + variant)
    checked = perflab("run", str(changed), "--check", "--format", "json")
    assert checked.returncode == 0, checked.stderr
    ignored = json.loads(checked.stdout)["calibration"]
    assert not ignored["used"] and "server_sha256: the server binary changed since" in ignored["note"], ignored
    refused = perflab("run", str(changed), "--check", "--calibration", doc["file"])
    assert refused.returncode == 2 and "server_sha256: the server binary changed since" in refused.stderr
