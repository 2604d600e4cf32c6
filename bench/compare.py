#!/usr/bin/env python3
"""Compares two cohort-bench JSON files (--json): the ratio of each row of NEW to the same row of
OLD, so a change's effect is one command.

    bench/compare.py OLD.json NEW.json [--impl cohort] [--min-ratio R]

Rows match on (impl, algo, op, dtype, redop, size, in/out of place). For each, prints both busbw
figures and new/old (above 1: NEW is faster), then the geometric mean of the ratios per op and
form. Rows only one side has are listed at the end. --min-ratio R exits 1 when any matched row's
ratio is below R (a regression gate for scripts; noise on a shared machine is easily 10%).
A run made with --fresh-input and one made without do not measure the same thing: comparing them
prints a warning on stderr; so do one made with --allocate-per-call and one made without.
"""

import argparse
import json
import math
import sys
from collections import defaultdict


def rows_of(path):
    with open(path) as f:
        doc = json.load(f)
    rows = doc["rows"] if isinstance(doc, dict) else doc
    keyed = {}
    for r in rows:
        key = (r.get("impl", "cohort"), r.get("algo", "auto"), r["op"], r.get("dtype", ""),
               r.get("redop", ""), int(r["size_bytes"]), bool(r.get("in_place", False)))
        keyed[key] = r
    return doc if isinstance(doc, dict) else {}, keyed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--impl", default=None, help="only rows of this implementation")
    parser.add_argument("--min-ratio", type=float, default=None)
    args = parser.parse_args()

    old_doc, old = rows_of(args.old)
    new_doc, new = rows_of(args.new)
    for label, doc in (("old", old_doc), ("new", new_doc)):
        if doc:
            print(f"# {label}: {doc.get('world_size', '?')} ranks on {doc.get('hostname', '?')}, "
                  f"{doc.get('iters', '?')} iters"
                  + (", fresh input" if doc.get("fresh_input") else ""))
    # Files from before the flag existed have no field: they ran without it.
    if bool(old_doc.get("fresh_input")) != bool(new_doc.get("fresh_input")):
        print("warning: one run rewrote its input before every call (--fresh-input) and the "
              "other did not; their times are not comparable", file=sys.stderr)
    if bool(old_doc.get("allocate_per_call")) != bool(new_doc.get("allocate_per_call")):
        print("warning: one run allocated its buffers around every call (--allocate-per-call) "
              "and the other did not; their times are not comparable", file=sys.stderr)
    print(f"{'impl':>7} {'algo':>14} {'op':>14} {'bytes':>11} {'form':>7} "
          f"{'old GB/s':>9} {'new GB/s':>9} {'new/old':>8}")
    groups = defaultdict(list)
    worst = math.inf
    for key in sorted(old.keys() & new.keys(), key=lambda k: (k[0], k[1], k[2], k[6], k[5])):
        impl, algo, op, _, _, size, in_place = key
        if args.impl and impl != args.impl:
            continue
        before = old[key].get("busbw_gbps") or 0.0
        after = new[key].get("busbw_gbps") or 0.0
        # Time is what both runs measured directly; busbw is derived from it and the size.
        t_old = old[key].get("time_us")
        t_new = new[key].get("time_us")
        ratio = t_old / t_new if t_old and t_new else float("nan")
        form = "inplace" if in_place else "out"
        print(f"{impl:>7} {algo:>14} {op:>14} {size:>11} {form:>7} {before:>9.3f} {after:>9.3f} "
              f"{ratio:>8.2f}")
        if not math.isnan(ratio):
            groups[(impl, algo, op, form)].append(ratio)
            worst = min(worst, ratio)
    print()
    for (impl, algo, op, form), ratios in sorted(groups.items()):
        mean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"geometric mean {impl} {algo} {op} {form}: {mean:.3f} over {len(ratios)} sizes")
    only_old = sorted(old.keys() - new.keys())
    only_new = sorted(new.keys() - old.keys())
    if only_old or only_new:
        print(f"\nrows only in {args.old}: {len(only_old)}; only in {args.new}: {len(only_new)}")
    if args.min_ratio is not None and worst < args.min_ratio:
        print(f"\nworst ratio {worst:.3f} is below {args.min_ratio}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
