"""One finding of a run: a warning, a stall, a note or a failure, with the cells it is about. Every
report format lists them (report/findings.py collects them; io_findings.py adds the storage's).

    Finding("warning", "durability", "durability variant on tmpfs: ...", (0, 3))
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Finding:
    level: str  # warning | stall | info | failed
    # noise | repeats | unsettled | stall | drift | short | busy | steal | alloc-dropped | alloc-started
    # | adaptive | adaptive-missed | host-speed | dataset | durability | failed
    kind: str
    text: str
    cells: tuple[int, ...] = field(default=())
