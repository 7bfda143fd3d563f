"""Flame graphs of folded profiles: SVG through inferno, differential SVG, speedscope JSON.

Rendering is inferno's (`inferno-flamegraph`, the Rust port of FlameGraph, installed by
`make setup` with `cargo install inferno`): interactive SVG (zoom, search), kernel frames
(`_[k]`) coloured apart with the `java` palette. The input is per transaction, so two
variants compare fairly: each stack's samples summed over the repeats, scaled to samples per
million transactions (integers, as inferno reads them) and shown per 1000 transactions.
A differential graph (`stack a b` lines, FlameGraph's difffolded format) is drawn on B's
shape, red where B spends more per transaction than A, blue where less.

speedscope (https://www.speedscope.app/file-format-schema.json): one "sampled" profile,
one sample per unique stack weighted by its samples per 1000 transactions.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path

from perflab.errors import PerflabError, ToolMissingError

SCALE = 1_000_000  # folded counts written for inferno: samples per million transactions
SHOWN = 1000  # shown per 1000 transactions


def inferno(tool: str = "inferno-flamegraph") -> str:
    found = shutil.which(tool) or next(
        (p for p in (os.path.expanduser(f"~/.cargo/bin/{tool}"), f"/usr/local/bin/{tool}") if os.access(p, os.X_OK)),
        None,
    )
    if found is None:
        hint = (
            "run `make setup` (it builds inferno with cargo: `perflab docs profiles`), "
            "or use --format speedscope / folded"
        )
        raise ToolMissingError(f"{tool} not found", hint)
    return found


def per_million_txn(stacks: Counter, transactions: float) -> Counter:
    if not transactions:
        raise PerflabError("the profile has no transactions to divide by", "was the cell's window empty?")
    return Counter({s: round(c * SCALE / transactions) for s, c in stacks.items() if c})


def folded_text(stacks: Counter) -> str:
    return "".join(f"{s} {c}\n" for s, c in sorted(stacks.items()) if c > 0)


def diff_text(a: Counter, b: Counter) -> str:
    """difffolded lines `stack a b` over the union of stacks."""
    return "".join(f"{s} {a.get(s, 0)} {b.get(s, 0)}\n" for s in sorted(set(a) | set(b)))


def svg(text: str, title: str, subtitle: str, differential: bool = False) -> str:
    argv = [
        inferno(),
        "--title",
        title,
        "--subtitle",
        subtitle,
        "--countname",
        f"samples per {SHOWN} transactions",
        "--factor",
        str(SHOWN / SCALE),
        "--minwidth",
        "0.05",
        "--colors",
        "java",
    ]
    if differential:
        argv.remove("java")
        argv.remove("--colors")
    done = subprocess.run(argv, input=text, capture_output=True, text=True, check=False, timeout=300)
    if done.returncode != 0 or "<svg" not in done.stdout:
        raise PerflabError(f"inferno-flamegraph failed (exit {done.returncode}): {done.stderr.strip()[:500]}")
    return done.stdout


def speedscope(stacks: Counter, name: str) -> str:
    frames: dict[str, int] = {}
    samples, weights = [], []
    for stack, count in sorted(stacks.items()):
        samples.append([frames.setdefault(f, len(frames)) for f in stack.split(";")])
        weights.append(count * SHOWN / SCALE)
    doc = {
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "exporter": "perflab",
        "name": name,
        "activeProfileIndex": 0,
        "shared": {"frames": [{"name": f} for f in frames]},
        "profiles": [
            {
                "type": "sampled",
                "name": name,
                "unit": "none",
                "startValue": 0,
                "endValue": sum(weights),
                "samples": samples,
                "weights": weights,
            }
        ],
    }
    return json.dumps(doc)


def write(path: Path, text: str) -> None:
    Path(path).write_text(text, encoding="utf-8")
