"""scripts/train_demo.py, shortened: 2 gloo ranks and one process give the same curves."""

import json
import os
import pathlib
import subprocess
import sys

import ascend_ops

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_short_demo_curves_agree(tmp_path):
    env_path = str(pathlib.Path(ascend_ops.__file__).parents[1])
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "train_demo.py"), "--steps", "6", "--out",
         str(tmp_path), "--timeout", "240"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": env_path})
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((tmp_path / "curves.json").read_text())
    for model in ("gpt", "cnn"):
        single, ranks = summary["single"][model], summary["ranks"][model]
        assert len(single) == len(ranks) == 6
        assert single[-1] < single[0], f"{model} did not learn: {single}"
        # bfloat16 LM head: the sharded and whole-vocabulary GEMMs round differently.
        assert summary["max_abs_diff"][model] < 5e-3, summary["max_abs_diff"]
    assert (tmp_path / "curves.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert "largest difference" in result.stdout
