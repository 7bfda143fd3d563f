"""A dataset per on-disk format, end to end, with a real MariaDB that claims another version.

The seam, and what it proves: no MariaDB of another major version can be had here without
building one (CI must not build a server). So the build is an unpacked package of another 10.11
(bookworm's, beside the installed bookworm-security one: tests/archive.py reads which) seen
through a basedir whose `sbin/mariadbd` is a two-line wrapper: for --version it says
"11.4.99-MariaDB-relabelled" (so perflab takes it for another format, mariadb-11.4), for
anything else it execs the real mariadbd of that package. Everything else is real: the build's own
mariadb-install-db (the package's, found beside the binary) initialises the datadir with the
build's binary and SQL scripts, that server serves sysbench prepare and shuts down cleanly,
the snapshot is kept as RESULTS/dataset-mariadb-11.4/ beside the installed server's, its
cells restore it, a SIGKILLed run resumes on both kept snapshots without preparing again,
and the reports name the variant that ran on its own dataset. What it cannot prove is that a
really different format works: the datadir it prepares is 10.11's.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perflab.builds import package as P
from tests.conftest import ROOT, perflab
from tests.integration.helpers import used, write_experiment
from tests.integration.test_builds import installed_says, old_package, old_says
from tests.integration.test_resume import meta, stored_keys



def old_short() -> str:
    """The unpacked package's server version without Debian's revision: "10.11.18-MariaDB"."""
    return old_says().split("-MariaDB")[0] + "-MariaDB"


WRAPPER = """\
#!/bin/sh
# perflab test seam: a real MariaDB 10.11 that says it is 11.4.99 (another on-disk format)
if [ "$1" = "--version" ]; then
    echo "$0  Ver 11.4.99-MariaDB-relabelled for debian-linux-gnu on x86_64 (perflab test)"
    exit 0
fi
exec {real} "$@"
"""
SPEC = """
[experiment]
design = "sequential"  # what this test checks runs one server at a time
name = "it-datasets"
duration = "2s"
warmup = "1s"
repeats = 2

[dataset]
tables = 1
table_size = 2000

[workload]
threads = [1]

[builds.relabelled]
basedir = "{base}"

[variants.server]
current    = {{}}
relabelled = {{ build = "relabelled" }}
"""
FORMAT = "mariadb-11.4"


def stored(out: Path) -> int:
    """Cells stored so far (0 while the results database is being created)."""
    try:
        return len(stored_keys(out)) if (out / "results.db").exists() else 0
    except sqlite3.OperationalError:  # its tables are not there yet
        return 0


def relabelled_basedir(tmp_path: Path, cache: Path) -> Path:
    """BASE/sbin/mariadbd (the wrapper), BASE/bin/mariadb-install-db and BASE/share -> the package's."""
    package = P.unpack("old", old_package(), cache)
    usr = package.binary.parent.parent  # packages/.../root/usr
    base = tmp_path / "relabelled"
    (base / "sbin").mkdir(parents=True)
    (base / "bin").mkdir()
    wrapper = base / "sbin" / "mariadbd"
    wrapper.write_text(WRAPPER.format(real=package.binary))
    wrapper.chmod(0o755)
    (base / "bin" / "mariadb-install-db").symlink_to(usr / "bin" / "mariadb-install-db")
    (base / "share").symlink_to(usr / "share")
    return base


def test_a_build_of_another_format_runs_on_its_own_dataset_and_resume_keeps_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    cache = tmp_path / "cache"
    monkeypatch.setenv("PERFLAB_CACHE", str(cache))
    base = relabelled_basedir(tmp_path, cache)
    spec = write_experiment(tmp_path / "d.toml", SPEC.format(base=base))
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "perflab", "run", str(spec), "-o", str(out)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and stored(out) < 1:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)  # both snapshots are prepared before the first cell
    _, stderr = proc.communicate()
    assert f"dataset for {FORMAT} (by 11.4.99-MariaDB-relabelled" in stderr
    # each kept for --resume, each made by its own server and install script
    assert (out / "dataset" / "mysql_upgrade_info").read_text() == installed_says()
    assert (out / f"dataset-{FORMAT}" / "mysql_upgrade_info").read_text() == old_short()
    init = (out / "logs" / f"prepare-{FORMAT}-init.txt").read_text()
    assert init.startswith(f"$ {base}/bin/mariadb-install-db --no-defaults --datadir=")
    assert f"--lc-messages-dir={base}/share/mysql" in init.splitlines()[0]
    assert f"Starting MariaDB {old_short()}" in (out / "logs" / f"prepare-{FORMAT}-error.log").read_text()
    datasets = meta(out, "datasets")
    assert datasets[FORMAT]["dir"] == f"dataset-{FORMAT}" and datasets[FORMAT]["builds"] == ["relabelled"]
    assert datasets[FORMAT]["init"] == f"{base}/bin/mariadb-install-db (the build's own)"
    assert datasets["mariadb-10.11"]["builds"] == [None] and datasets["mariadb-10.11"]["own"] is False

    done = perflab("run", "--resume", str(out), timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "prepared" not in done.stderr  # both snapshots restored, none prepared again
    assert meta(out, "dataset_reprepared") is None
    assert not (out / "dataset").exists() and not (out / f"dataset-{FORMAT}").exists()  # complete
    doc = json.loads(perflab("export", str(out)).stdout)
    assert [c["status"] for c in used(doc["cells"])] == ["ok"] * 4  # an unsettled cell is measured again
    for cell in doc["cells"]:  # each cell's server, in its own log: the version it really is
        real = old_short() if cell["variant"]["server"] == "relabelled" else installed_says()
        log = (out / "logs" / f"cell-{cell['id']:04d}" / "error.log").read_text()
        assert f"Starting MariaDB {real}" in log, cell["key"]
    said = (
        f"dataset: server=relabelled ran on its own dataset ({FORMAT}), prepared by 11.4.99-MariaDB-relabelled "
        "with mariadb-install-db (the build's own); the others on the mariadb-10.11 dataset: the same tables"
    )
    text = perflab("report", str(out)).stdout
    assert said in " ".join(text.split()), text
    markdown = perflab("report", str(out), "--format", "markdown").stdout
    assert said in markdown
