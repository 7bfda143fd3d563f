# perflab: `make demo` runs the quick experiment, `make test` runs the whole test suite.
# Both install what is missing first (Debian 12, as root), idempotently.

PYTHON ?= python3
APT_PACKAGES = mariadb-server mariadb-client sysbench libjemalloc2 libtcmalloc-minimal4 \
	libmimalloc2.0 linux-perf elfutils sysstat util-linux procps \
	chromium
DEMO_STAMP := $(shell date +%Y%m%d-%H%M%S)
DEMO_DIR ?= results/quick-$(DEMO_STAMP)

.PHONY: setup apt python demo test unit integration bench

setup: apt python

apt:
	@missing=$$(for p in $(APT_PACKAGES); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q "install ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "apt packages: all present"; fi

# Reinstall unless the installed perflab is this checkout's (a second clone must not test the first).
python:
	@here=$$(pwd); cd / && $(PYTHON) -c 'import sys, os, perflab, click, pydantic, rich, scipy, pytest, hypothesis, jinja2, playwright; \
		sys.exit(os.path.dirname(perflab.__file__) != os.path.join(sys.argv[1], "perflab"))' "$$here" 2>/dev/null \
		&& echo "python package: installed from this checkout" \
		|| (cd "$$here" && $(PYTHON) -m pip install -q --root-user-action=ignore -e '.[test]')

demo: setup
	@# exit 1 (some cells failed) still has a report worth reading; 2, 3 and 130 do not
	$(PYTHON) -m perflab run examples/quick.toml -o $(DEMO_DIR); status=$$?; [ $$status -le 1 ] || exit $$status; \
	$(PYTHON) -m perflab report $(DEMO_DIR) --html -o $(DEMO_DIR)/report.html >/dev/null || exit $$?; \
	echo "HTML report: $(abspath $(DEMO_DIR))/report.html"; exit $$status

test: setup
	$(PYTHON) -m pytest

unit: python
	$(PYTHON) -m pytest tests/unit

integration: setup
	$(PYTHON) -m pytest tests/integration
