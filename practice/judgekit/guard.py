"""Inputs checked after every call: a learner function that changes one of its arguments in place is named.

The worker wraps each function it hands to cases.call: before the call it copies the plain data among the
arguments (tensors, lists, tuples, dicts, numbers, strings), after it compares; the first change is kept in
the case's log and becomes the case's failure message. Other objects (a model, a cache, a drafter, a
generator, a function) are the exercise's business and are not compared, nor are tensors on the `meta` device
(judgekit.devices), which hold no values.
"""
from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch

_SKIP = object()  # a value this module does not compare
_ATOMS = (type(None), bool, int, float, str)  # values compared with ==


def _atoms(values: Any) -> bool:
    return all(type(v) in _ATOMS for v in values)


def snapshot(value: Any) -> Any:
    """A deep copy of the plain data in `value`; _SKIP for anything else."""
    if isinstance(value, torch.Tensor):
        return _SKIP if value.is_meta else value.detach().clone()
    if isinstance(value, (list, tuple)):
        return type(value), (list(value) if _atoms(value) else [snapshot(v) for v in value])
    if isinstance(value, dict):
        return dict, {k: snapshot(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return _SKIP


def _short(value: Any) -> str:
    text = repr(value.tolist() if isinstance(value, torch.Tensor) else value)
    return text if len(text) <= 80 else text[:77] + "..."


def change(before: Any, after: Any) -> str | None:
    """How `after` differs from the snapshot `before`, or None when it does not."""
    if before is _SKIP:
        return None
    if isinstance(before, torch.Tensor):
        if not isinstance(after, torch.Tensor) or after.shape != before.shape or after.dtype != before.dtype:
            return "its shape or dtype changed"
        now = after.detach()
        if torch.equal(now, before):
            return None
        differs = (now != before) & ~(now.isnan() & before.isnan()) if before.is_floating_point() else now != before
        if not bool(differs.any()):
            return None
        index = [int(i) for i in differs.nonzero()[0]]
        return f"entry {index} was {before[tuple(index)].item():.6g}, is now {now[tuple(index)].item():.6g}"
    if isinstance(before, tuple) and len(before) == 2 and before[0] in (list, tuple, dict):
        kind, items = before
        if kind is dict:
            if not isinstance(after, dict) or set(after) != set(items):
                return f"its keys changed to {sorted(after)}" if isinstance(after, dict) else "it was replaced"
            for key, old in items.items():
                if change(old, after[key]) is not None:
                    return f"key {key!r} was {_short(_plain(old))}, is now {_short(after[key])}"
            return None
        if not isinstance(after, kind) or len(after) != len(items):
            return f"it was {_short(_plain(before))}, is now {_short(after)}"
        if _atoms(items) and _atoms(after):  # a list of numbers or strings (token ids, parents): one comparison
            return None if list(after) == items else f"it was {_short(_plain(before))}, is now {_short(after)}"
        if any(change(old, new) is not None for old, new in zip(items, after)):
            return f"it was {_short(_plain(before))}, is now {_short(after)}"
        return None
    return None if before == after else f"it was {before!r}, is now {after!r}"


def _plain(snap: Any) -> Any:
    """A snapshot back as plain data, for messages."""
    if isinstance(snap, tuple) and len(snap) == 2 and snap[0] in (list, tuple, dict):
        kind, items = snap
        return {k: _plain(v) for k, v in items.items()} if kind is dict else kind(_plain(v) for v in items)
    return snap


def guarded(fn: Callable[..., Any], name: str, log: list[str]) -> Callable[..., Any]:
    """`fn`, checking its arguments after each call; the first change found is appended to `log`."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    plain = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]

    def call(*args: Any, **kwargs: Any) -> Any:
        names = plain[:len(args)] + [f"argument {i + 1}" for i in range(len(plain), len(args))]
        named = {**dict(zip(names, args)), **kwargs}
        before = {arg: snapshot(value) for arg, value in named.items()}
        out = fn(*args, **kwargs)
        if not log:
            for arg, value in named.items():
                how = change(before[arg], value)
                if how is not None:
                    copy = f"{arg}.clone()" if isinstance(value, torch.Tensor) else f"{type(value).__name__}({arg})"
                    log.append(f"{name} modified the caller's `{arg}` in place ({how}); never change an input: "
                               f"work on a copy (`{copy}`).")
                    break
        return out

    return call


def count_calls(obj: Any, *methods: str) -> list[int]:
    """Count calls of `obj.<method>` for each of `methods` in a list only the judge holds (the learner may reset a
    drafter's own `calls`): each method is replaced on this instance by a wrapper that appends 1 per call; a call made
    inside another counted call (a drafter's `next_top` that calls its `next_logits`) is not counted again."""
    calls: list[int] = []
    depth = [0]

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        def counting(*args: Any, **kwargs: Any) -> Any:
            if not depth[0]:
                calls.append(1)
            depth[0] += 1
            try:
                return original(*args, **kwargs)
            finally:
                depth[0] -= 1
        return counting

    for method in methods:
        setattr(obj, method, wrap(getattr(obj, method)))
    return calls
