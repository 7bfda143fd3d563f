"""pydantic's validation errors -> Problems a user can act on.

Each error becomes Problem(key path as written in the file, expected, found, hint); the
union members pydantic tried for one value collapse into one expectation:

    experiment.duration: expected a duration, found str 'soon'; write it like "20s", "1m30s" or "500ms"
"""

from __future__ import annotations

import re
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel

from perflab.errors import Problem, did_you_mean


def key_path(keys: list[str]) -> str:
    return ".".join(_printable(k) for k in keys) or "(top level)"


def _printable(key: str) -> str:
    """A key as printed in a key path: shortened if long; quoted and escaped if it is blank,
    starts or ends with a space, or holds control or unassigned characters (a report line
    stays one line, and never reaches the terminal as an escape sequence)."""
    key = short(key)
    if key and key.isprintable() and key.strip() == key:
        return key
    return '"' + key.encode("unicode_escape").decode("ascii").replace('"', '\\"') + '"'


def short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 20] + "..." + text[-17:]


_TYPE_NAMES = {
    "int_type": "an integer",
    "string_type": "a string",
    "bool_type": "true or false",
    "list_type": "a list",
    "dict_type": "a table",
    "model_type": "a table",
    "float_type": "a number",
    "int_parsing": "an integer",
    "float_parsing": "a number",
}
# how to write a value of that type, for the hint "write it like ..."
_TYPE_EXAMPLES = {
    "int_type": "3",
    "string_type": '"text"',
    "bool_type": "true",
    "list_type": "[1, 2]",
    "dict_type": "{ key = value }",
    "model_type": "a [section] or { key = value }",
    "float_type": "2.5",
    "int_parsing": "3",
    "float_parsing": "2.5",
}
_WRITE_LIKE = "write it like "


# What pydantic adds to an error's loc besides the user's keys: the union member it tried
# ("str", "int", "function-after[...]", ...) and "[key]" for an error in a table's key.
_LOC_TAG = re.compile(r"^(?:str|int|float|bool|none|constrained-\w+|[\w-]+\[.*\])$")


def _user_loc(loc: tuple[Any, ...], raw: Any) -> list[str]:
    """The key path the user wrote: loc without pydantic's tags. A part that is a key of the
    file at that point is always kept, so a key named like a tag (or `strict_mode`) survives."""
    path: list[str] = []
    node = raw
    for part in loc:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        elif part == "[key]" or (isinstance(part, str) and _LOC_TAG.match(part)):
            continue
        else:
            node = None  # a key the file lacks (e.g. a missing one)
        path.append(str(part))
    return path


def collapse(problems: list[Problem]) -> list[Problem]:
    """One problem per (path, found): the union members pydantic tried become one expectation."""
    groups: dict[tuple[str, str], list[Problem]] = {}
    for problem in problems:
        groups.setdefault((problem.path, problem.found), []).append(problem)
    out = []
    for (path, found), group in groups.items():
        expected = list(dict.fromkeys(p.expected for p in group))
        hints = list(dict.fromkeys(p.hint for p in group if p.hint))
        if len(hints) > 1 and all(h.startswith(_WRITE_LIKE) for h in hints):
            hints = [_WRITE_LIKE + _either([h.removeprefix(_WRITE_LIKE) for h in hints])]
        out.append(Problem(path, _either(expected), found, "; ".join(hints) or None))
    return out


def _either(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def problem(err: dict[str, Any], raw: Any = None, schema: type[BaseModel] | None = None) -> Problem:
    """`err` as a Problem; `schema`: the model validated, whose keys a "did you mean" is drawn from."""
    loc = _user_loc(err["loc"], raw)
    path = key_path(loc)
    kind = err["type"]
    found = _show(err.get("input"))
    ctx = err.get("ctx") or {}
    if kind == "perflab":
        return Problem(path, ctx["expected"], ctx.get("found") or found, ctx.get("hint") or None)
    if kind == "extra_forbidden":
        found = f"unknown key {short(loc[-1])!r}"
        known = keys_at(schema, loc[:-1]) if schema is not None else []
        hint = did_you_mean(loc[-1], known, "check the spelling; see `perflab docs experiment`")
        return Problem(path, "no such key", found, hint)
    if kind == "missing":
        return Problem(path, "a value", "nothing", f"add {loc[-1]} = ...")
    if kind == "literal_error":
        return Problem(path, f"one of {ctx.get('expected')}", found, "or leave the key out for the default")
    if kind in ("greater_than_equal", "greater_than"):
        bound = ctx.get("ge", ctx.get("gt"))
        return Problem(path, f"a number >= {bound}", found, f"use {bound} or more")
    if kind in ("less_than_equal", "less_than"):
        bound = ctx.get("le", ctx.get("lt"))
        return Problem(path, f"a number <= {bound}", found, f"use {bound} or less; no experiment needs more")
    if kind == "value_error":
        return Problem(
            path,
            "a consistent combination",
            str(ctx.get("error", err["msg"])),
            "each setting may come from one axis only",
        )
    if kind in _TYPE_NAMES:
        return Problem(path, _TYPE_NAMES[kind], found, _WRITE_LIKE + _TYPE_EXAMPLES[kind])
    return Problem(path, err["msg"], found, "see `perflab docs experiment`")


def keys_at(schema: type[BaseModel], loc: list[str]) -> list[str]:
    """The keys the file may have at `loc` (a table of `schema`), for a "did you mean"."""
    node: Any = schema
    for part in loc:
        node = _child(node, part)
    model = _model(node)
    if model is None:
        return []
    return [f.alias or name for name, f in model.model_fields.items()]


def _child(node: Any, part: str) -> Any:
    """The type of `part` inside `node`: a model's field, a table's values, a list's items."""
    model = _model(node)
    if model is not None:
        field = next((f for n, f in model.model_fields.items() if part in (n, f.alias)), None)
        return field.annotation if field is not None else None
    origin, args = get_origin(node), get_args(node)
    if origin is Annotated:
        return _child(args[0], part)
    if origin is dict:
        return args[1]
    if origin is list:
        return args[0]
    return next((c for c in (_child(a, part) for a in args) if c is not None), None)


def _model(node: Any) -> type[BaseModel] | None:
    """`node` as a pydantic model, through Annotated, Optional and unions (the first model)."""
    if isinstance(node, type) and issubclass(node, BaseModel):
        return node
    if get_origin(node) not in (Annotated, Union, UnionType):
        return None  # a table's or list's items are not the table
    return next((m for m in (_model(a) for a in get_args(node)) if m is not None), None)


def _show(value: Any) -> str:
    if isinstance(value, dict):
        return "a table" if value else "an empty table"
    if isinstance(value, list):
        return f"a list {value[:20]!r}"[:80]  # (nesting is bounded by _raw_problems)
    if isinstance(value, str):
        value = value[:100]
    return f"{type(value).__name__} {value!r}"[:80]
