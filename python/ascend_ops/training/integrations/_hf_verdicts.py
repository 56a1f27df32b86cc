"""The checker's verdicts that `apply` reads: those shipped with the package
(hf_verdicts.json, written by scripts/sweep_hf_models.py for the Transformers version it
names) and those a user's `--check` recorded (user_verdicts_path()).

A verdict holds for the exact code it was reached on: the class's forward and the loss it
calls (code_key, _hf_heads.py). With another Transformers installed, a class keeps its
shipped verdict where that code is unchanged, and needs a `--check` where it changed.
"""

from __future__ import annotations

import functools
import json
import os
import pathlib

SHIPPED = pathlib.Path(__file__).with_name("hf_verdicts.json")
ENV_PATH = "ASCEND_OPS_HF_VERDICTS"


@functools.lru_cache(maxsize=1)
def shipped_file() -> dict:
    with SHIPPED.open() as f:
        return json.load(f)


def shipped() -> dict[str, dict]:
    """class name → its verdict as the sweep recorded it."""
    return shipped_file()["classes"]


def user_verdicts_path() -> pathlib.Path:
    """Where `--check` records: $ASCEND_OPS_HF_VERDICTS, else the user's cache directory."""
    if os.environ.get(ENV_PATH):
        return pathlib.Path(os.environ[ENV_PATH])
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(cache) / "ascend_ops" / "hf_verdicts.json"


def recorded() -> dict[str, list[dict]]:
    """class name → the verdicts `--check` recorded for it (one per code_key)."""
    path = user_verdicts_path()
    if not path.exists():
        return {}
    with path.open() as f:
        return json.load(f)


def record(verdict) -> pathlib.Path:
    """Adds (or replaces, for its code_key) a checker's verdict in the user's file."""
    path = user_verdicts_path()
    entries = recorded()
    kept = [v for v in entries.get(verdict.name, []) if v.get("code_key") != verdict.code_key]
    entries[verdict.name] = kept + [verdict.to_json()]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(entries, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)
    return path


def lookup(class_name: str, key: str) -> dict | None:
    """The verdict for this class's code (code_key), recorded by the user or shipped."""
    for verdict in reversed(recorded().get(class_name, [])):
        if verdict.get("code_key") == key:
            return verdict
    verdict = shipped().get(class_name)
    if verdict is not None and verdict.get("code_key") == key:
        return verdict
    return None


def verified_classes() -> tuple[str, ...]:
    """The classes the shipped sweep found exact."""
    return tuple(sorted(n for n, v in shipped().items() if v["verdict"] == "exact"))
