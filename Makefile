# perflab: `make demo` runs the quick experiment, `make test` runs the whole test suite.
# Both install what is missing first (Debian 12, as root), idempotently.

# PYTHON makes the virtual environment VENV that perflab and its tests run in (target python);
# VPY, its interpreter, is what every target below runs. Debian 12's python3 is 3.11.
PYTHON ?= python3
VENV = .venv
VPY = $(VENV)/bin/python
LOCK = requirements.lock
# gcc, libc6-dev: [observe] alloc compiles its counter (perflab_alloc.c) on first use
# g++, cmake, make, bison, dpkg-dev: [builds] from source (docs/builds.md); the tests build a
# small cmake fixture with them. A real MariaDB build also needs its libraries: make setup-builds.
# zlib1g-dev: a PostgreSQL build from source (docs/builds.md, "PostgreSQL") needs only gcc, make and
# zlib's headers with perflab's configure (the release tarball ships its generated parser: no flex).
# gpg, gpgconf, gpg-agent: the debug_symbols tests sign a local apt archive with a throw-away key (tests/debarchive.py)
# python3, python3-venv: the virtual environment of target python (Debian's python3 has no ensurepip without it)
# zstd: trees copied to a host go through it (hosts/trees.py; gzip where it is missing), a quarter of gzip's CPU
APT_PACKAGES = mariadb-server mariadb-client sysbench libjemalloc2 libtcmalloc-minimal4 \
	libmimalloc2.0 linux-perf elfutils libdw1 binutils sysstat util-linux procps \
	chromium gcc libc6-dev g++ cmake make bison dpkg-dev ccache zlib1g-dev gpg gpgconf gpg-agent \
	python3 python3-venv zstd
# what mariadbd 10.11 needs to build from Debian's source with perflab's configuration
# (debian/control's Build-Depends, minus what only plugins, clients and tests use)
BUILD_PACKAGES = libncurses-dev libssl-dev zlib1g-dev libpcre2-dev liburing-dev libaio-dev \
	libfmt-dev pkg-config
DEB_SRC = /etc/apt/sources.list.d/perflab-deb-src.sources
# flame graph SVGs (perflab flame): inferno, the Rust port of FlameGraph, built by cargo
# (about 70 s on 2 vCPUs, once); pinned so every machine with a current Rust draws the same graphs.
# inferno 0.12 needs rustc >= 1.71. Debian 12's own cargo (rustc 1.63) builds 0.11.7 (--locked:
# later 0.11 releases lock clap 4, which needs rustc >= 1.64): used when there is no newer Rust.
INFERNO_VERSION = 0.12.8
INFERNO_RUSTC = 1.71
INFERNO_DEBIAN_VERSION = 0.11.7
CARGO ?= $(shell command -v cargo || echo $$HOME/.cargo/bin/cargo)
NO_FLAMES = flame graph SVGs are skipped (perflab flame --format speedscope|folded, profile and diff still work); \
	install Rust from https://rustup.rs and re-run make setup to get them
DEMO_STAMP := $(shell date +%Y%m%d-%H%M%S)
DEMO_DIR ?= results/quick-$(DEMO_STAMP)

.PHONY: setup apt postgresql ssh deb-src setup-builds setup-bench python lock inferno go-tpc demo test unit integration bench

setup: apt postgresql ssh deb-src python inferno go-tpc

# tool = "go-tpc" (TPC-C, docs/workloads.md): PingCAP's go-tpc, pinned, built by `go install` through
# the Go module proxy into /usr/local/bin (GOBIN); perflab looks on $$PATH, then in /usr/local/bin and ~/go/bin.
# Go itself is not a Debian 12 package new enough for it: the Go on $PATH or /usr/local/go/bin/go
# (the official tarball's place); without either, one line says so and setup goes on (only
# go-tpc experiments need it: exit 3 naming this target). Idempotent: a go-tpc that `go version -m`
# shows built from GO_TPC_VERSION exactly is kept; another version (v1.0.7, the pin before
# v1.0.12: no postgres driver) is replaced. perflab's preflight reads the same build information.
GO_TPC_VERSION = v1.0.12
GO ?= $(shell command -v go || { [ -x /usr/local/go/bin/go ] && echo /usr/local/go/bin/go; })
go-tpc:
	@if [ -x /usr/local/bin/go-tpc ] && [ -n "$(GO)" ] && "$(GO)" version -m /usr/local/bin/go-tpc 2>/dev/null \
			| grep -q "mod[[:space:]]*github.com/pingcap/go-tpc[[:space:]]*$(GO_TPC_VERSION)[[:space:]]"; then \
		echo "go-tpc: present ($(GO_TPC_VERSION))"; \
	elif [ -z "$(GO)" ]; then \
		echo "go-tpc: not installed: no Go toolchain (go on \$$PATH or /usr/local/go/bin/go); tool = \"go-tpc\" needs it: install Go >= 1.16, then make go-tpc"; \
	else echo "installing go-tpc $(GO_TPC_VERSION) with $(GO)"; \
		GOBIN=/usr/local/bin "$(GO)" install github.com/pingcap/go-tpc/cmd/go-tpc@$(GO_TPC_VERSION); fi

# server = "postgresql" (docs/experiment.md, "PostgreSQL"): Debian 12's PostgreSQL 15, whose package
# has postgres, initdb and pgbench in /usr/lib/postgresql/15/bin. perflab starts its own postgres per
# cell and never uses a system cluster: createcluster.conf says create_main_cluster = false BEFORE the
# install (postgresql-common honours it), so none is created. A cluster that already exists (an image
# that had one) is left alone: never started, stopped or changed here. --force-confold: the file
# written first is kept when the package brings its own (no question asked without a terminal).
# Idempotent.
PG_PACKAGES = postgresql-15 postgresql-client-15
PG_CREATECLUSTER = /etc/postgresql-common/createcluster.conf
postgresql:
	@missing=$$(for p in $(PG_PACKAGES); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q "install ok installed" || echo $$p; done); \
	if [ -z "$$missing" ]; then echo "postgresql: present"; else \
		mkdir -p $$(dirname $(PG_CREATECLUSTER)); \
		if ! grep -qs '^create_main_cluster *= *false' $(PG_CREATECLUSTER); then \
			printf "%s\n" "# added by perflab (make setup): no system cluster" "create_main_cluster = false" >> $(PG_CREATECLUSTER); fi; \
		echo "installing:" $$missing; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold $$missing; fi

# Remote hosts (docs/hosts.md): tests/integration start Debian's sshd inside network namespaces of
# their own (ip netns, veth pairs), by absolute path with their own config, in the foreground; the
# system's ssh service is never started, stopped or changed. Installing openssh-server would start
# it (its postinst runs invoke-rc.d ssh start): /etc/ssh/sshd_not_to_be_run, written BEFORE the
# install and only when the package is not installed yet, is Debian's own switch that keeps the
# service from ever starting (README.Debian; the init script and ssh.service both honour it). A
# machine that already had openssh-server is left as it is. Idempotent.
SSH_PACKAGES = openssh-server openssh-client iproute2
SSH_NOT_TO_BE_RUN = /etc/ssh/sshd_not_to_be_run
ssh:
	@missing=$$(for p in $(SSH_PACKAGES); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q "install ok installed" || echo $$p; done); \
	if [ -z "$$missing" ]; then echo "ssh: present"; else \
		if echo "$$missing" | grep -qx openssh-server; then mkdir -p /etc/ssh && \
			echo "# added by perflab (make setup): the system sshd is not started; perflab's tests run their own" \
			> $(SSH_NOT_TO_BE_RUN); fi; \
		echo "installing:" $$missing; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold $$missing; fi

# `source = "debian"` builds fetch Debian's source package: apt needs deb-src entries. Written
# once, beside the system's own sources (which are never edited); idempotent.
deb-src:
	@if [ -f $(DEB_SRC) ]; then echo "deb-src: present"; else \
		printf '%s\n' "# added by perflab's make setup: Debian source packages for [builds] source = \"debian\"" \
		"Types: deb-src" "URIs: http://deb.debian.org/debian" "Suites: bookworm bookworm-updates" "Components: main" \
		"Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" "" \
		"Types: deb-src" "URIs: http://deb.debian.org/debian-security" "Suites: bookworm-security" "Components: main" \
		"Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" > $(DEB_SRC) && apt-get update -qq && echo "deb-src: added $(DEB_SRC)"; fi

# what some bench/ scripts compare perflab with: heaptrack (alloc_overhead), strace (archive/alloc_exactness)
setup-bench: setup
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends heaptrack strace zstd gdb

# the libraries a MariaDB build from source needs (not needed by make test: it builds a fixture)
setup-builds: setup
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(BUILD_PACKAGES)

apt:
	@missing=$$(for p in $(APT_PACKAGES); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q "install ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "apt packages: all present"; fi

# Python (issue 48): perflab and every Python package it or its tests use live in VENV, this
# checkout's own virtual environment; nothing goes into the system's interpreter. LOCK pins every
# package, the dependencies of dependencies too, to one version with the sha256 of each of its files
# (as pip-compile writes them: `make lock`). pip installs it in hash-checking mode (--require-hashes:
# a file whose hash the lock does not list, or a package it does not pin, is refused), from wheels
# only (no build step runs code the lock does not pin); then perflab itself, editable, without
# dependencies and without build isolation (built by the lock's setuptools: nothing else fetched).
# VENV_STAMP holds the sha256 of LOCK, pyproject.toml and this checkout's path: while they match and
# VPY runs, nothing is done; else VENV is made anew (--clear: no package the lock dropped stays).
VENV_STAMP = $(VENV)/perflab-lock.sha256
PIP = $(VPY) -m pip install -q --disable-pip-version-check
python:
	@key=$$({ sha256sum $(LOCK) pyproject.toml && echo "$(CURDIR)"; } | sha256sum | cut -c1-64); \
	if [ "$$(cat $(VENV_STAMP) 2>/dev/null)" = "$$key" ] && $(VPY) -c '' 2>/dev/null; then \
		echo "python: $(VENV) up to date with $(LOCK)"; exit 0; fi; \
	echo "python: installing $(LOCK) into $(VENV)"; \
	$(PYTHON) -m venv --clear $(VENV) \
		|| { echo "python: $(PYTHON) -m venv failed; on Debian: apt-get install python3-venv (make setup does)"; exit 1; }; \
	$(PIP) --require-hashes --only-binary :all: -r $(LOCK) && $(PIP) --no-deps --no-build-isolation -e . \
		&& echo "$$key" > $(VENV_STAMP) && echo "python: perflab in $(VENV) ($(VENV)/bin/perflab; . $(VENV)/bin/activate puts it on PATH)"

# `make lock` writes LOCK anew from pyproject.toml, after a dependency or a bound changed there:
# pip-compile keeps every pin that still satisfies pyproject.toml, pins what is new, and lists the
# sha256 of every file of each pinned version (all platforms' wheels); setuptools too (--allow-unsafe,
# --build-deps-for editable: what `pip install -e .` builds with). `make lock UPGRADE=1` moves every
# pin to the newest version allowed. pip-tools, pinned here, runs in a virtual environment of its
# own (build/pip-tools-VERSION). pip-compile resolves for the Python it runs on: PYTHON, 3.11 as Debian 12's.
PIP_TOOLS_VERSION = 7.6.2
LOCK_VENV = build/pip-tools-$(PIP_TOOLS_VERSION)
lock:
	@[ -x $(LOCK_VENV)/bin/pip-compile ] || { $(PYTHON) -m venv --clear $(LOCK_VENV) \
		&& $(LOCK_VENV)/bin/python -m pip install -q --disable-pip-version-check pip-tools==$(PIP_TOOLS_VERSION); }
	CUSTOM_COMPILE_COMMAND="make lock" $(LOCK_VENV)/bin/pip-compile --quiet --generate-hashes --allow-unsafe \
		--strip-extras --no-emit-find-links --extra test --build-deps-for editable $(if $(UPGRADE),--upgrade) -o $(LOCK) pyproject.toml

# Without a Rust newer than INFERNO_RUSTC, Debian's own cargo (the ordinary apt way) builds the
# older inferno; when that cannot be had either, one line says so and setup goes on.
# A failed attempt is remembered in INFERNO_SKIPPED (delete it to try again), so that setup, run
# before every `make test`, does not retry a build that cannot succeed.
# Debian's cargo 0.66 reads the crates.io index from its git repository on github.com; where only
# crates.io itself is reachable, the same build is retried on the sparse index (stable from cargo
# 1.68 on; in 0.66 an unstable flag, hence RUSTC_BOOTSTRAP=1 for that one command).
DEBIAN_CARGO_INSTALL = /usr/bin/cargo install --locked --quiet inferno --version $(INFERNO_DEBIAN_VERSION) --root /usr/local
INFERNO_LOG = build/inferno-build.log
INFERNO_SKIPPED = build/inferno-skipped
inferno:
	@if command -v inferno-flamegraph >/dev/null || [ -x $$HOME/.cargo/bin/inferno-flamegraph ]; then \
		echo "inferno: present"; \
	elif [ -f $(INFERNO_SKIPPED) ] && ! [ -x "$(CARGO)" -a "$(CARGO)" != /usr/bin/cargo ]; then \
		echo "inferno: $$(cat $(INFERNO_SKIPPED))"; \
	elif [ -x "$(CARGO)" ] && printf '%s\n' $(INFERNO_RUSTC) "$$("$$(dirname "$(CARGO)")/rustc" --version | cut -d' ' -f2)" \
			| sort -C -V; then \
		echo "installing inferno $(INFERNO_VERSION) with cargo"; \
		"$(CARGO)" install --locked --quiet inferno --version $(INFERNO_VERSION); \
	elif mkdir -p build && { [ -x /usr/bin/cargo ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			cargo >$(INFERNO_LOG) 2>&1; } && echo "installing inferno $(INFERNO_DEBIAN_VERSION) with Debian's cargo" \
			&& { $(DEBIAN_CARGO_INSTALL) >>$(INFERNO_LOG) 2>&1 \
			|| RUSTC_BOOTSTRAP=1 CARGO_UNSTABLE_SPARSE_REGISTRY=true $(DEBIAN_CARGO_INSTALL) >>$(INFERNO_LOG) 2>&1; }; then \
		echo "inferno: installed $(INFERNO_DEBIAN_VERSION) in /usr/local/bin"; \
	else echo "not installed (no Rust >= $(INFERNO_RUSTC), and Debian's cargo failed: $(INFERNO_LOG)); $(NO_FLAMES)" \
			>$(INFERNO_SKIPPED); echo "inferno: $$(cat $(INFERNO_SKIPPED))"; fi

demo: setup
	@# exit 1 (some cells failed) still has a report worth reading; 2, 3 and 130 do not
	$(VPY) -m perflab run examples/quick.toml -o $(DEMO_DIR); status=$$?; [ $$status -le 1 ] || exit $$status; \
	$(VPY) -m perflab report $(DEMO_DIR) --html -o $(DEMO_DIR)/report.html >/dev/null || exit $$?; \
	echo "HTML report: $(abspath $(DEMO_DIR))/report.html"; exit $$status

# The unit tests in parallel, two workers a CPU (they measure nothing, and wait a third of their
# time on subprocesses and timeouts: 61 -> 45 s on 2 vCPUs, 2026-12-01). Then the integration tests:
# first the `quiet` modules, one at a time (their assertions are on measured effects or turn
# timings, or on the machine as a whole), then the others IT_WORKERS at a time, a module per
# worker (--dist loadfile: a module's fixtures are made once), the longest first (the order
# tests/integration/conftest.py gives them; --no-loadscope-reorder keeps xdist from ordering
# them by their number of tests instead). Each pytest process gives its runs
# their own PERFLAB_TMPFS (tests/conftest.py), and the SSH labs take one lock (sshhosts.py). Their
# clients are paced (tests/integration/helpers.PACE): the runs are bound by their fixed windows,
# not by CPU, so workers beyond the CPUs shorten the whole (docs/development.md, "Tests"). All
# three always run; any failing fails the target.
IT_WORKERS ?= 5
INTEGRATION = $(VPY) -m pytest -m quiet tests/integration; quiet=$$?; \
	$(VPY) -m pytest -n $(IT_WORKERS) --dist loadfile --no-loadscope-reorder -m "not quiet" tests/integration; shared=$$?
# perflab's bytecode written once (`perflab` runs hundreds of times in the integration tests, and
# an environment with PYTHONDONTWRITEBYTECODE=1 would compile every module in each of them: 0.27
# CPU-s a run, measured 2026-11-30); compileall only writes what is stale. The variable is unset for
# the tests too: every pytest process (xdist's workers each collect every module) would otherwise
# rewrite and compile every test module again (the unit part 110.9 -> 104.6 s, 2026-11-30)
BYTECODE = unset PYTHONDONTWRITEBYTECODE; $(VPY) -m compileall -q perflab > /dev/null
test: setup
	@$(BYTECODE); $(VPY) -m pytest -n $$((2 * $$(nproc))) tests/unit; unit=$$?; \
	$(INTEGRATION); \
	echo "make test: unit tests exit $$unit, integration tests exit $$quiet (quiet) and $$shared (in parallel)"; \
	test $$unit -eq 0 -a $$quiet -eq 0 -a $$shared -eq 0

unit: python
	@$(BYTECODE); $(VPY) -m pytest -n $$((2 * $$(nproc))) tests/unit

integration: setup
	@$(BYTECODE); $(INTEGRATION); test $$quiet -eq 0 -a $$shared -eq 0
