"""Every class of the installed Transformers' causal-LM and image-text-to-text mappings through
the loss patch's checker (ascend_ops/training/integrations/_hf_check.py): a tiny random model
of each, unpatched against patched, loss and gradients, float32 and bfloat16.

Writes the verdicts that ship with the package and that `apply` reads
(python/ascend_ops/training/integrations/hf_verdicts.json) and the table of
docs/integrations.md (between its sweep markers). One thread, 1 to 2 minutes.

    python scripts/sweep_hf_models.py               # the sweep; rewrites both files
    python scripts/sweep_hf_models.py --only llama LlavaForConditionalGeneration
                                                    # a few, printed only
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import platform
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402

from ascend_ops.training.integrations import _hf_check as check  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
VERDICTS = ROOT / "python" / "ascend_ops" / "training" / "integrations" / "hf_verdicts.json"
DOC = ROOT / "docs" / "integrations.md"
BEGIN, END = "<!-- sweep table: scripts/sweep_hf_models.py writes below -->", "<!-- sweep table end -->"
ORDER = ("exact", "differs", "refused", "not run")


def sweep(only: list[str]) -> dict[str, check.Verdict]:
    classes = check.mapped_classes()
    wanted = {check.resolve(what)[0].__name__ for what in only}
    out = {}
    for name, info in sorted(classes.items()):
        if only and name not in wanted:
            continue
        cls = getattr(transformers, name, None)
        if cls is None:
            verdict = check.Verdict(name=name, verdict="not run", model_type=info["model_type"],
                                    mappings=tuple(info["mappings"]),
                                    reason="not importable from transformers")
        else:
            verdict = check.check_class(cls, info["model_type"], mappings=tuple(info["mappings"]))
        out[name] = verdict
        print(f"{verdict.verdict:8s} {name:48s} {verdict.seconds:6.1f} s  {verdict.rule}  "
              f"{verdict.reason[:160]}", flush=True)
    return out


def table(verdicts: dict[str, check.Verdict]) -> str:
    counts = collections.Counter(v.verdict for v in verdicts.values())
    lines = [f"Transformers {transformers.__version__}, torch {torch.__version__}: "
             f"{len(verdicts)} classes, "
             + ", ".join(f"{counts[k]} {k}" for k in ORDER if counts[k]) + ". "
             f"Sample: in the test suite (tests/test_hf_models.py). Between head and loss: what "
             f"the tiny model's forward does there (its values are the tiny configuration's).",
             "",
             "| class | model type | mapping | verdict | sample | between head and loss, or why not |",
             "|---|---|---|---|---|---|"]
    for v in sorted(verdicts.values(), key=lambda v: (ORDER.index(v.verdict), v.name)):
        mapping = " + ".join("CLM" if m == "causal-lm" else "ITT" for m in v.mappings)
        why = v.rule if v.verdict == "exact" else v.reason
        why = why.replace("|", "\\|")
        lines.append(f"| `{v.name}` | {v.model_type} | {mapping} | {v.verdict} | "
                     f"{'yes' if v.name in check.SAMPLE else ''} | {why} |")
    return "\n".join(lines) + "\n"


def write_doc(text: str) -> None:
    doc = DOC.read_text()
    start, end = doc.index(BEGIN) + len(BEGIN), doc.index(END)
    DOC.write_text(doc[:start] + "\n\n" + text + "\n" + doc[end:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=[],
                        help="model types or class names: check these, print, write nothing")
    args = parser.parse_args()
    torch.set_num_threads(1)  # tiny models: one thread is fastest, and leaves the other cores
    transformers.logging.set_verbosity_error()
    start = time.perf_counter()
    verdicts = sweep(args.only)
    counts = collections.Counter(v.verdict for v in verdicts.values())
    print(dict(counts), f"{time.perf_counter() - start:.0f} s")
    if args.only:
        return 0
    VERDICTS.write_text(json.dumps({
        "transformers": transformers.__version__, "torch": torch.__version__,
        "machine": platform.machine(), "written_by": "scripts/sweep_hf_models.py",
        "counts": {k: counts[k] for k in ORDER},
        "classes": {n: v.to_json() for n, v in sorted(verdicts.items())},
    }, indent=1, sort_keys=False) + "\n")
    write_doc(table(verdicts))
    print(f"wrote {VERDICTS.relative_to(ROOT)} and the table of {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
