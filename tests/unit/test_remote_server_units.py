"""The server on another host without a host (docs/hosts.md): its /proc read over SSH parsed, this
machine's accounting with a server whose CPU is the host's, the row's `build.host`, and the sysbench
login file (mode 600, no password on the command line)."""

from __future__ import annotations

import stat
from pathlib import Path
from types import SimpleNamespace

import pytest

from perflab.hosts import server as remote_server
from perflab.run import accounting
from perflab.run.ends import ServerThere
from perflab.workloads import sysbench
from perflab.hosts.place import parse_counters
from perflab.places.procfs import ProcCounters

STAT = "4711 (mariadbd) S 1 4711 4711 0 -1 4194560 900 0 7 0 250 75 0 0 20 0 30 0 1234 0 0\n100\n"
SWITCHES = "voluntary_ctxt_switches:\t10\nnonvoluntary_ctxt_switches:\t2\nvoluntary_ctxt_switches:\t5\n"


def test_the_hosts_proc_counters_are_parsed() -> None:
    read = parse_counters(STAT + SWITCHES)
    assert read == ProcCounters(2.5, 0.75, 900, 7, 15, 2)
    with pytest.raises(ProcessLookupError):
        parse_counters("cat: /proc/4711/stat: No such file or directory\n")


def test_this_machines_other_cpu_counts_none_of_the_remote_servers() -> None:
    end_ = ServerThere.__new__(ServerThere)
    zero = ProcCounters.zero()
    start = accounting.WindowStart(zero, *([None] * 2), busy_s=0.0, client_s=None, at=0.0)  # type: ignore[arg-type]
    server = ProcCounters(3.0, 1.0, 100, 0, 40, 2)
    end = accounting.WindowEnd(server, own_s=0.1, children_s=0.0, busy_s=2.0, window_s=2.0)
    rss = SimpleNamespace(end=1 << 30, peak=1 << 30)
    out = end_.resources(start, end, None, 1000, rss)
    assert out["server_cpu_s"] == 4.0 and out["server_cpu_us_per_txn"] == 4000.0 and out["rss_end_bytes"] == 1 << 30
    # this machine was busy 2 s over 2 s: all of it "other" (the server's 4 s are the host's), not max(0, 2 - 4.1)
    assert out["other_cpu_cores"] == pytest.approx(0.95) and out["pss_end_bytes"] is None


def test_the_login_file_is_the_owners_only(tmp_path: Path) -> None:
    path = sysbench.login_file(tmp_path, {"db-driver": "mysql", "mysql-password": "ab12"})
    assert path.read_text() == "mysql-password=ab12\n" and stat.S_IMODE(path.stat().st_mode) == 0o600


HOSTS_META = {
    "version": 1,
    "hosts": {"db": {"ssh": "root@10.77.1.2", "clock": {"start": {"rtt_s": 0.0003}}, "lost": None}},
    "differences": {
        "kernel": {"local": "6.1.0-27-amd64", "db": "6.1.0-28-amd64"},
        "packages": {"local": {"libc6": "2.36-9", "sysbench": "1.0.20"}, "db": {"libc6": "2.36-9"}},
    },
}
PRINT = {"kernel": "6.1.0-28-amd64", "governor": "performance", "packages": {"libc6": "2.36-9"}}


def _cell(governor: str) -> dict:
    return {"build": {"host": {"name": "db", "fingerprint": {**PRINT, "governor": governor}}}, "client": {}}


def test_the_report_says_where_the_server_ran_and_where_hosts_differ() -> None:
    from perflab.report.phrases import host_differences, host_lines

    lines = host_lines({"hosts": HOSTS_META}, [_cell("performance"), _cell("powersave")])
    assert (
        lines[0]
        == "server on host db (root@10.77.1.2): 0.30 ms round trip; differs from this machine in kernel, packages"
    )
    assert lines[1] == "server host db's fingerprint changed between cells in governor"
    hosts, rows = host_differences({"hosts": HOSTS_META})
    assert hosts == ["local", "db"]  # this machine first
    assert rows == [("kernel", ["6.1.0-27-amd64", "6.1.0-28-amd64"]), ("packages.sysbench", ["1.0.20", "absent"])]
    assert host_lines({"hosts": HOSTS_META}, [_cell("performance")])[1:] == []


def test_the_html_report_shows_the_hosts_and_their_differences(tmp_path: Path) -> None:
    import shutil

    from perflab.report import html, markdown, model
    from perflab.store.results import Results

    tiny = tmp_path / "tiny"
    shutil.copytree(Path(__file__).resolve().parent.parent / "data" / "report" / "tiny", tiny)
    with Results(tiny) as results:
        results.set_meta(hosts=HOSTS_META)
        page = html.render(model.build(results))
    assert '<ul id="remote-hosts"><li>host on host db (root@10.77.1.2): 0.30 ms round trip' in page
    assert '<table id="host-differences">' in page and '<th class="l">this machine</th>' in page
    assert '<td class="l">packages.sysbench</td><td class="l">1.0.20</td><td class="l">absent</td>' in page
    with Results(tiny) as results:
        text = markdown.render(model.build(results), None)
    assert "- host on host db (root@10.77.1.2): 0.30 ms round trip" in text
    assert "| packages.sysbench | 1.0.20 | absent |" in text


def test_status_of_a_server_on_a_host_is_read_from_here_over_tcp(tmp_path: Path) -> None:
    from perflab.servers import kind

    link = SimpleNamespace(name="db", target=SimpleNamespace(user="root"))
    place = SimpleNamespace(name="db", link=link, rundir=SimpleNamespace(path="/dev/shm/h"), address="10.77.1.2",
                            binaries={"mariadb": "/usr/bin/mariadb"}, program="/usr/sbin/mariadbd",
                            free_port=lambda: 23456,
                            version="/usr/sbin/mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu")  # fmt: skip
    server = kind("mariadb").remote_server(place, "/dev/shm/h/cell-0001/data", {}, local=tmp_path)  # type: ignore[arg-type]
    sampler = kind("mariadb").status(server, "0123abcd")
    argv = sampler.argv()
    assert argv[1:] == [f"--defaults-file={tmp_path}/status.cnf", "--batch", "--skip-column-names", "--unbuffered"]
    text = (tmp_path / "status.cnf").read_text()
    assert "host=10.77.1.2\nport=23456\nuser=perflab\npassword=0123abcd\n" in text and "protocol=tcp" in text
    assert stat.S_IMODE((tmp_path / "status.cnf").stat().st_mode) == 0o600 and not any("0123abcd" in a for a in argv)
    assert "WHERE ENABLED" in sampler.query  # MariaDB 10.5+: the host's version, not this machine's
    here = kind("mariadb").status(kind("mariadb").server(tmp_path / "here", tmp_path / "here/data", {}), None)
    assert here.argv()[1:4] == ["--no-defaults", f"--socket={tmp_path}/here/mysqld.sock", "--user=root"]


class _Link:
    """A Connection answering `run` from (argv fragment -> (status, stdout)), recording `put`."""

    target, name = "root@db1", "db"

    def __init__(self, answers: dict[str, tuple[int, str]]) -> None:
        self.answers, self.ran, self.put_files = answers, [], []

    def run(self, argv: list[str], timeout: float = 60, stdin: str | None = None) -> SimpleNamespace:
        self.ran.append(argv)
        status, out = next((v for k, v in self.answers.items() if k in " ".join(argv)), (0, ""))
        return SimpleNamespace(status=status, stdout=out, stderr="")

    def put(self, local: Path, remote: str) -> None:
        self.put_files.append(remote)


def _place(link: _Link) -> remote_server.ServerHost:
    hosts = SimpleNamespace(link=lambda name: link, rundir=lambda name: SimpleNamespace(path="/dev/shm/h", link=link))
    return remote_server.ServerHost(hosts, "db", "10.0.0.2", "pw", {"mariadbd": "/usr/sbin/mariadbd"}, "10.11", "")


def test_a_preload_on_a_server_host_is_the_hosts_own_library_found_once() -> None:
    from perflab.errors import ToolMissingError

    real = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4.5.9"
    link = _Link({"dpkg-query -S": (0, "libtcmalloc-minimal4:amd64: x\n"), "dpkg-query -W": (0, "2.10-2"),
                  "libtcmalloc_minimal.so.4": (0, real + "\n")})  # fmt: skip
    place = _place(link)
    assert place.preload("tcmalloc") == real and place.preload("tcmalloc") == real and place.preload("glibc") is None
    assert sum("readlink" in " ".join(argv) for argv in link.ran) == 1  # looked for once per run
    assert place.package_of(real) == "libtcmalloc-minimal4 2.10-2"
    missing = _place(_Link({"libjemalloc": (1, "")}))
    with pytest.raises(ToolMissingError) as exc:
        missing.preload("jemalloc")
    assert "host db has no jemalloc library" in exc.value.message and "apt-get install libjemalloc2" in exc.value.hint


def test_a_preload_given_by_its_path_is_copied_to_the_host(tmp_path: Path) -> None:
    library = tmp_path / "libmine.so"
    library.write_bytes(b"\x7fELF")
    link = _Link({"readlink -f /dev/shm/h/lib-0-libmine.so": (0, "/dev/shm/h/lib-0-libmine.so\n")})
    assert _place(link).preload(str(library)) == "/dev/shm/h/lib-0-libmine.so"
    assert link.put_files == ["/dev/shm/h/lib-0-libmine.so"]


def test_a_preload_not_mapped_on_the_host_fails_the_cell() -> None:
    from perflab.errors import AllocatorNotMappedError

    place = _place(_Link({}))
    place.hosts.hosts = {"db": SimpleNamespace(fingerprint={"glibc": "glibc 2.36"})}
    cell, record = SimpleNamespace(preload="jemalloc"), {}
    server = SimpleNamespace(preload="/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", pid=4711, build=None,
                             mapped=lambda: {"/usr/lib/x86_64-linux-gnu/libc.so.6"})  # fmt: skip
    with pytest.raises(AllocatorNotMappedError, match="not mapped into the server on host db"):
        remote_server._allocator(server, place, cell, record)
    server.mapped = lambda: {"/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"}
    place.package_of = lambda path: "libjemalloc2 5.3.0-1"  # type: ignore[method-assign]  # dpkg there
    assert remote_server._allocator(server, place, cell, record) == {
        "allocator_library": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
        "allocator_version": "libjemalloc2 5.3.0-1",
    }
    assert record["libc"] == {"library": None, "version": "2.36", "build": None}  # the host's (no libc mapped here)
    server.preload, server.mapped = None, lambda: {"/usr/lib/x86_64-linux-gnu/libc.so.6"}
    record = {"root": {"glibc_version": "2.43"}}  # a private root's C library (a glibc variant)
    assert remote_server._allocator(server, place, cell, record)["allocator_version"] == "glibc 2.43"
    assert record["libc"]["version"] == "2.43" and record["libc"]["library"].endswith("libc.so.6")


def test_the_allocator_a_build_links_is_its_own_there_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """sid's mysqld links tcmalloc: on its host, with no preload, that is its own default (read from
    the binary here it was copied from), as here; another allocator mapped there fails the cell."""
    from perflab.errors import AllocatorNotMappedError
    from perflab.run import allocator_proof

    monkeypatch.setattr(allocator_proof.elf, "needed", lambda path: {"libtcmalloc.so.4", "libc.so.6"})
    place = _place(_Link({}))
    place.hosts.hosts = {"db": SimpleNamespace(fingerprint={"glibc": "glibc 2.36"})}
    place.package_of = lambda path: None  # type: ignore[method-assign]  # a root's copy: no package there
    tcmalloc = "/dev/shm/h/tree-0/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4.6.5"
    libc = "/dev/shm/h/tree-0/usr/lib/x86_64-linux-gnu/libc.so.6"
    build = SimpleNamespace(extra={"shipped_from": "/root/.cache/perflab/debroot/roots/x/usr/sbin/mysqld"})
    server = SimpleNamespace(preload=None, pid=4711, build=build, mapped=lambda: {tcmalloc, libc})
    record = {"root": {"glibc_version": "2.43"}}
    assert remote_server._allocator(server, place, SimpleNamespace(preload=None), record) == {
        "allocator_library": tcmalloc,
        "allocator_version": "tcmalloc (linked by mysqld)",
    }
    server.build = None  # the host's own server: nothing here to read, so any allocator mapped is foreign
    with pytest.raises(AllocatorNotMappedError, match="glibc malloc requested but tcmalloc"):
        remote_server._allocator(server, place, SimpleNamespace(preload=None), record)
