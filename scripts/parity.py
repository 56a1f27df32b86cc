#!/usr/bin/env python
"""Parity of every available implementation against the float64 reference.

Prints the table of `python -m ascend_ops` for the implementations asked for and, with
--csv, appends its rows to a CSV file (one row per op, implementation and dtype).
Exits 1 if any row fails SPEC §4's tolerances.

    python scripts/parity.py                       # every available implementation
    python scripts/parity.py --impl cpu --csv parity.csv
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import pathlib
import platform
import sys

import torch

import ascend_ops
from ascend_ops.parity import ParityRow, format_table, parity_rows


def append_csv(path: pathlib.Path, rows: list[ParityRow]) -> None:
    fields = ["machine", "torch"] + [f.name for f in dataclasses.fields(ParityRow)]
    new = not path.exists()
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        if new:
            writer.writeheader()
        for row in rows:
            writer.writerow({"machine": platform.node() or platform.machine(),
                             "torch": torch.__version__, **dataclasses.asdict(row)})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", action="append", choices=ascend_ops.IMPLS,
                        help="implementation to check (repeatable; default: all available)")
    parser.add_argument("--csv", type=pathlib.Path, help="append the rows to this CSV file")
    args = parser.parse_args(argv)

    status = ascend_ops.available_impls()
    for name in args.impl or []:
        if not status[name].available:
            print(f"{name}: unavailable: {status[name].reason}", file=sys.stderr)
            return 2
    rows = parity_rows(args.impl)
    print(format_table(rows))
    if args.csv:
        append_csv(args.csv, rows)
    return 0 if all(r.passed for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
