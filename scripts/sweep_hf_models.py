"""Every class of the installed Transformers' causal-LM and image-text-to-text mappings through
the loss patch's checker (ascend_ops/training/integrations/_hf_check.py): a tiny random model
of each, unpatched against patched, loss and gradients, float32 and bfloat16.

Writes the verdicts that ship with the package and that `apply` reads
(python/ascend_ops/training/integrations/hf_verdicts.json), their table (docs/hf_models.csv,
one row per class) and its summary line in docs/integrations.md (between its sweep
markers). One thread, 1 to 2 minutes.

    python scripts/sweep_hf_models.py               # the sweep; rewrites both files
    python scripts/sweep_hf_models.py --only llama LlavaForConditionalGeneration
                                                    # a few, printed only
"""

from __future__ import annotations

import argparse
import collections
import csv
import io
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
TABLE = ROOT / "docs" / "hf_models.csv"
BEGIN, END = "<!-- sweep summary: scripts/sweep_hf_models.py writes below -->", "<!-- sweep summary end -->"
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


def summary(verdicts: dict[str, check.Verdict]) -> str:
    counts = collections.Counter(v.verdict for v in verdicts.values())
    return (f"Transformers {transformers.__version__}, torch {torch.__version__}: "
            f"{len(verdicts)} classes, "
            + ", ".join(f"{counts[k]} {k}" for k in ORDER if counts[k]) + ".")


def table(verdicts: dict[str, check.Verdict]) -> str:
    """One CSV row per class: its verdict, whether the suite's sample holds it, and what its
    tiny model's forward does between head and loss (exact) or why it was not (the rest)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["class", "model_type", "mapping", "verdict", "in_suite_sample",
                     "between_head_and_loss_or_why_not"])
    for v in sorted(verdicts.values(), key=lambda v: (ORDER.index(v.verdict), v.name)):
        mapping = "+".join("causal-lm" if m == "causal-lm" else "image-text-to-text"
                           for m in v.mappings)
        writer.writerow([v.name, v.model_type, mapping, v.verdict,
                         "yes" if v.name in check.SAMPLE else "",
                         v.rule if v.verdict == "exact" else v.reason])
    return out.getvalue()


def write_docs(verdicts: dict[str, check.Verdict]) -> None:
    TABLE.write_text(table(verdicts))
    doc = DOC.read_text()
    start, end = doc.index(BEGIN) + len(BEGIN), doc.index(END)
    DOC.write_text(doc[:start] + "\n" + summary(verdicts) + "\n" + doc[end:])


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
    write_docs(verdicts)
    print(f"wrote {VERDICTS.relative_to(ROOT)}, {TABLE.relative_to(ROOT)} and the summary in "
          f"{DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
