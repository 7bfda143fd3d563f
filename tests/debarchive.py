"""A tiny Debian archive on disk, for tests of private roots (builds/debroot.py, dbgsym.py):
.deb files made with dpkg-deb, Packages and a signed InRelease written here (no apt-ftparchive),
signed with a throw-away key whose public keyring apt is given (signed-by=).

    deb = make_deb(tmp / "build", "perflab-spin", "1.0-1", {"usr/sbin/mysqld": binary}, depends="libc6")
    with signing_key(tmp / "gnupg") as key:
        publish(tmp / "archive", "sid", [deb], key)      # dists/sid/InRelease, Packages; pool/
    # apt: deb [signed-by=KEY.keyring] copy:///tmp/archive sid main
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path


def make_deb(workdir: Path, name: str, version: str, files: dict[str, Path], depends: str = "") -> Path:
    """A binary package of `files` (path in the package -> file to copy), amd64."""
    tree = workdir / f"{name}_{version}"
    shutil.rmtree(tree, ignore_errors=True)
    for inside, source in files.items():
        (tree / inside).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, tree / inside)
    (tree / "DEBIAN").mkdir(parents=True)
    control = [f"Package: {name}", f"Version: {version}", "Architecture: amd64", "Maintainer: perflab <t@example.org>"]
    control += [f"Depends: {depends}"] if depends else []
    control += ["Description: a perflab test package", ""]
    (tree / "DEBIAN" / "control").write_text("\n".join(control))
    deb = workdir / f"{name}_{version}_amd64.deb"
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", "-Zgzip", "-b", str(tree), str(deb)], check=True, capture_output=True
    )
    return deb


@dataclass(frozen=True)
class Key:
    home: Path  # GNUPGHOME
    keyring: Path  # the public key, exported: apt's signed-by=


@contextlib.contextmanager
def signing_key(home: Path) -> Iterator[Key]:
    """A throw-away ed25519 signing key in its own GNUPGHOME; its gpg-agent is stopped after."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    gpg = ["gpg", "--homedir", str(home), "--batch", "--quiet", "--pinentry-mode", "loopback", "--passphrase", ""]
    try:
        subprocess.run(
            [*gpg, "--quick-gen-key", "perflab test <t@example.org>", "ed25519", "sign", "never"], check=True
        )
        keyring = home / "archive.gpg"
        keyring.write_bytes(subprocess.run([*gpg, "--export"], check=True, capture_output=True).stdout)
        yield Key(home, keyring)
    finally:
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], check=False, capture_output=True)


def publish(archive: Path, suite: str, debs: list[Path], key: Key) -> None:
    """dists/SUITE/{InRelease,main/binary-amd64/Packages} and the .deb files in pool/."""
    (archive / "pool").mkdir(parents=True, exist_ok=True)
    stanzas = []
    for deb in debs:
        shutil.copy2(deb, archive / "pool" / deb.name)
        control = subprocess.run(["dpkg-deb", "-f", str(deb)], check=True, capture_output=True, text=True).stdout
        data = deb.read_bytes()
        extra = f"Filename: pool/{deb.name}\nSize: {len(data)}\nSHA256: {hashlib.sha256(data).hexdigest()}\n"
        stanzas.append(control.rstrip("\n") + "\n" + extra)
    packages = archive / "dists" / suite / "main" / "binary-amd64" / "Packages"
    packages.parent.mkdir(parents=True, exist_ok=True)
    packages.write_text("\n".join(stanzas))
    body = packages.read_bytes()
    release = [
        "Origin: perflab-test",
        f"Suite: {suite}",
        f"Codename: {suite}",
        f"Date: {formatdate(usegmt=True)}",
        "Architectures: amd64",
        "Components: main",
        "SHA256:",
        f" {hashlib.sha256(body).hexdigest()} {len(body)} main/binary-amd64/Packages",
    ]
    (archive / "dists" / suite / "Release").write_text("\n".join(release) + "\n")
    gpg = ["gpg", "--homedir", str(key.home), "--batch", "--quiet", "--yes", "--pinentry-mode", "loopback"]
    subprocess.run(
        [*gpg, "--passphrase", "", "--clearsign", "-o", str(archive / "dists" / suite / "InRelease")]
        + [str(archive / "dists" / suite / "Release")],
        check=True,
    )
