"""Checks of the Python-level argument kinds (a tensor, a bool, an int), shared by the
public entry points.

The dtype, shape and value rules live in validation.cpp (and _validation.py); they assume
tensors. These run first, so that None or a number where a tensor belongs, or "0" where a
bool belongs, is a TypeError naming the argument (SPEC §6) instead of an AttributeError from
deep inside, or a truthy string taken as True. Plain Python on types: torch.compile traces
through them.
"""

from __future__ import annotations

import torch

__all__ = ["require_tensor", "require_optional_tensor", "require_bool", "require_int",
           "require_number"]


def _kind(value: object) -> str:
    return "None" if value is None else type(value).__name__


def require_tensor(op: str, name: str, value: object) -> None:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{op}: '{name}' must be a torch.Tensor, got {_kind(value)}")


def require_optional_tensor(op: str, name: str, value: object) -> None:
    if value is not None and not isinstance(value, torch.Tensor):
        raise TypeError(f"{op}: '{name}' must be a torch.Tensor or None, got {_kind(value)}")


def require_bool(op: str, name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{op}: '{name}' must be a bool, got {_kind(value)} {value!r}")


def require_int(op: str, name: str, value: object, *, optional: bool = False) -> None:
    """An int (a bool is refused: True is not a vocabulary id)."""
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        allowed = "an int or None" if optional else "an int"
        raise TypeError(f"{op}: '{name}' must be {allowed}, got {_kind(value)} {value!r}")


def require_number(op: str, name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{op}: '{name}' must be a float, got {_kind(value)} {value!r}")
