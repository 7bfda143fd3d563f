"""A variant whose unsettled cell was measured again (retry_of, fixed and adaptive repeats alike) is one
variant to `perflab profile`/`diff` selectors, and its retry stands in for the cell it replaced, as in the
analysis (CI 2026-11-28: 'no selector matches several variants: allocator=x, allocator=x/t2')."""

from __future__ import annotations

from typing import Any

from perflab.analyze.profile_select import select_cells


class Stored:
    def __init__(self, cells: list[dict[str, Any]]) -> None:
        self._cells = cells

    def cells(self) -> list[dict[str, Any]]:
        return self._cells

    def meta(self) -> dict[str, Any]:
        return {"experiment": {"axes": {"allocator": ["glibc-tuned"]}}}


def cell(id_: int, key: str, retry_of: int | None = None) -> dict[str, Any]:
    return {"id": id_, "key": key, "status": "ok", "variant": {"allocator": "glibc-tuned"}, "threads": 2,
            "retry_of": retry_of}  # fmt: skip


def test_a_retry_is_the_same_variant_and_replaces_its_cell():
    stored = Stored([cell(0, "allocator=glibc-tuned/t2/r1"), cell(1, "allocator=glibc-tuned/t2/r2"),
                     cell(2, "allocator=glibc-tuned/t2/r1/retry-of-0", retry_of=0)])  # fmt: skip
    label, chosen = select_cells(stored)  # type: ignore[arg-type]
    assert label == "allocator=glibc-tuned/t2"
    assert [c["id"] for c in chosen] == [1, 2]


def test_a_cell_id_still_selects_a_replaced_cell():
    stored = Stored([cell(0, "allocator=glibc-tuned/t2/r1"), cell(1, "allocator=glibc-tuned/t2/r1/retry-of-0", 0)])
    assert [c["id"] for c in select_cells(stored, cell_id=0)[1]] == [0]  # type: ignore[arg-type]
