"""The table of ``ab_runpy.sh``: per row and scale, the median over the rounds of each side's CPU
median (and of its wall median), and B against A.

Usage: python benchmarks/ab_runpy_compare.py AB_OUT"""
import json
import statistics
import sys
from pathlib import Path


def cell(data, row, scale):
    r = data.get(row)
    if r is None:
        return None
    r = r.get("warm", r)  # run.py after its --cold column keeps the warm one under "warm"
    x = r["scales"].get(scale)
    if not x:
        return None
    return x.get("cpu_median", x["median"]), x["median"]


def main() -> None:
    out = Path(sys.argv[1])
    sides = {s: [json.loads(p.read_text()) for p in sorted(out.glob(f"out-{s}-*.json"))] for s in "AB"}
    for row in sides["A"][0]:
        for scale in ("1", "4", "16"):
            a = [cell(d, row, scale) for d in sides["A"]]
            b = [cell(d, row, scale) for d in sides["B"]]
            if not a or not b or None in a or None in b:
                continue
            ca, cb = statistics.median(x[0] for x in a), statistics.median(x[0] for x in b)
            wa, wb = statistics.median(x[1] for x in a), statistics.median(x[1] for x in b)
            print(f"{row:22s} s{scale:2s} cpu A {ca:7.3f} B {cb:7.3f} {100 * (cb / ca - 1):+6.1f} %   "
                  f"wall A {wa:7.3f} B {wb:7.3f} {100 * (wb / wa - 1):+6.1f} %   "
                  f"rounds A {[round(x[0], 3) for x in a]} B {[round(x[0], 3) for x in b]}")


main()
