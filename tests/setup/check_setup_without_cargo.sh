#!/usr/bin/env bash
# Proof that `make setup` works on a fresh Debian 12 machine without a Rust toolchain, and that
# everything but flame graph SVGs then works. NOT run by `make test`: it needs root, debootstrap
# and the network, and takes a while (it installs mariadb, chromium, perf, ... into a chroot).
#
#   sudo tests/setup/check_setup_without_cargo.sh [--full] [CHROOT_DIR]   # default /tmp/perflab-chroot
#
# What it does:
#   1. debootstrap a minimal bookworm into CHROOT_DIR (kept and reused when it is already there,
#      but only if it has no cargo: a chroot where a previous check installed Debian's cargo is
#      built anew);
#   2. copy this working tree (tracked files, as they are now) to CHROOT_DIR/repo;
#   3. check there is no cargo/rustc anywhere in the chroot, then run `make setup` there;
#   4. run `make setup` a second time (idempotent: nothing left to install);
#   5. run the tests that need inferno (they must assert its absence, not skip) and
#      `perflab flame`, which must fail with exit 3 and the clear message;
#   6. with --full: `make unit` and `make demo` (a real benchmark run, about 2 minutes of CPU).
# Services are not started inside the chroot (policy-rc.d), and nothing outside CHROOT_DIR is
# touched but the mounts it makes (proc, sys, dev, a tmpfs on dev/shm), which it unmounts.
set -euo pipefail

FULL=0
if [ "${1:-}" = "--full" ]; then FULL=1; shift; fi
ROOT=${1:-/tmp/perflab-chroot}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
MIRROR=${MIRROR:-http://deb.debian.org/debian}
step() { printf '\n=== %s\n' "$*"; }

[ "$(id -u)" = 0 ] || { echo "run as root (debootstrap, chroot, mount)"; exit 2; }
command -v debootstrap >/dev/null || { echo "apt-get install debootstrap"; exit 2; }

if [ -e "$ROOT/usr/bin/cargo" ]; then
    step "$ROOT has Debian's cargo from an earlier check: building it anew"
    rm -rf --one-file-system "$ROOT"
fi
if [ ! -x "$ROOT/usr/bin/make" ]; then
    step "debootstrap bookworm into $ROOT"
    nice -n 19 debootstrap --variant=minbase --include=make,python3,ca-certificates \
        bookworm "$ROOT" "$MIRROR" >"$ROOT.debootstrap.log" 2>&1 || { tail -20 "$ROOT.debootstrap.log"; exit 1; }
fi

# What a machine has from its installer and network setup, not from perflab: name resolution,
# the local CA certificates (a network behind a TLS-inspecting proxy needs them), no services
# started by package scripts in a chroot.
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
    mkdir -p "$ROOT/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/"
    chroot "$ROOT" update-ca-certificates >/dev/null 2>&1
fi
printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"
chmod +x "$ROOT/usr/sbin/policy-rc.d"

mounts=()
cleanup() {
    for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[$i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
mount_in() { mount "$@" && mounts+=("${@: -1}"); }
mount_in -t proc proc "$ROOT/proc"
mount_in -t sysfs sys "$ROOT/sys"
mount_in --bind /dev "$ROOT/dev"
mount_in -t devpts devpts "$ROOT/dev/pts" -o newinstance,ptmxmode=0666
mount_in -t tmpfs -o size=4g tmpfs "$ROOT/dev/shm"

step "copy the working tree of $REPO to $ROOT/repo"
rm -rf "$ROOT/repo" && mkdir -p "$ROOT/repo"
(cd "$REPO" && git ls-files -z --cached --others --exclude-standard | xargs -0 tar -cf - --ignore-failed-read) \
    | tar -xf - -C "$ROOT/repo"

in_chroot() {
    chroot "$ROOT" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin /bin/bash -c "cd /repo && $1"
}

step "no Rust toolchain in the chroot"
in_chroot 'for t in cargo rustc rustup; do if command -v $t; then echo "found $t"; exit 1; fi; done;
           [ ! -e /root/.cargo ] && echo "no cargo, rustc, rustup or ~/.cargo"'

step "make setup (1st)"
in_chroot 'nice -n 10 make setup' 2>&1 | tee "$ROOT.setup1.log"
status=${PIPESTATUS[0]}
[ "$status" = 0 ] || { echo "FAIL: make setup exited $status"; exit 1; }
grep -c '^inferno:' "$ROOT.setup1.log" | grep -qx 1 || { echo "FAIL: not exactly one inferno line"; exit 1; }

step "make setup (2nd: nothing to do)"
in_chroot 'make setup' 2>&1 | tee "$ROOT.setup2.log"
grep -q 'apt packages: all present' "$ROOT.setup2.log" && grep -q 'python: .venv up to date with requirements.lock' "$ROOT.setup2.log" \
    || { echo "FAIL: the second make setup installed something"; exit 1; }

step "perflab doctor"
in_chroot '.venv/bin/perflab doctor' || { echo "FAIL: perflab doctor"; exit 1; }

if in_chroot 'command -v inferno-flamegraph >/dev/null'; then
    step "inferno was built with Debian's cargo: the inferno tests run on it"
else
    step "inferno is absent: the tests that need it assert the clear error instead"
fi
in_chroot '.venv/bin/python -m pytest -v -p no:cacheprovider tests/unit/test_flame_cli.py tests/unit/test_profiles.py tests/unit/test_gate.py -k "inferno or flame or doctor"' \
    || { echo "FAIL: inferno tests"; exit 1; }
in_chroot '.venv/bin/python - <<EOF
import subprocess, sys
from pathlib import Path
from perflab.report import flame
from perflab.errors import ToolMissingError
try:
    flame.inferno()
    print("inferno-flamegraph found: flame graphs are drawn")
    sys.exit(0)
except ToolMissingError as exc:
    print("perflab flame without inferno:", exc.message, "| hint:", exc.hint)
EOF'

if [ "$FULL" = 1 ]; then
    step "make unit"
    in_chroot 'nice -n 10 make unit' || { echo "FAIL: make unit"; exit 1; }
    step "make demo"
    in_chroot 'nice -n 10 make demo DEMO_DIR=/tmp/demo' || { echo "FAIL: make demo"; exit 1; }
fi
step "OK: make setup works without Rust"
