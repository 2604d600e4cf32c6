#!/usr/bin/env python3
"""Compares two cohort-bench JSON files (--json): the ratio of each row of NEW to the same row of
OLD, so a change's effect is one command.

    bench/compare.py OLD.json NEW.json [--impl cohort] [--min-ratio R] [--allow-mismatch]

Rows match on (impl, algo, op, dtype, redop, root, size, in/out of place). For each, prints both
busbw figures and old time / new time (above 1: NEW is faster), then the geometric mean of the
ratios per op and form, then the rows only one side has. --min-ratio R exits 1 when any matched
row's ratio is below R, when a row of OLD is missing from NEW (a size that crashed or was
skipped), or when no row matched at all (a regression gate for scripts; noise on a shared machine
is easily 10%).

Runs that do not measure the same thing are refused (exit 2) unless --allow-mismatch is given:
different world sizes, devices, mappable or ordinary memory, or time combined over ranks
differently (-a). A run made with --fresh-input and one made without, or with --allocate-per-call
and without, are compared with a warning on stderr.
"""

import argparse
import json
import math
import sys
from collections import defaultdict

# Run settings that change what a row's time means; files from before a field existed lack it.
MUST_MATCH = (("world_size", "world size"), ("device", "device"), ("mappable", "mappable memory"),
              ("average", "time combined over ranks (-a)"))


def rows_of(path):
    with open(path) as f:
        doc = json.load(f)
    rows = doc["rows"] if isinstance(doc, dict) else doc
    keyed = {}
    duplicates = 0
    for r in rows:
        key = (r.get("impl", "cohort"), r.get("algo", "auto"), r["op"], r.get("dtype", ""),
               r.get("redop", ""), int(r.get("root", -1)), int(r["size_bytes"]),
               bool(r.get("in_place", False)))
        duplicates += key in keyed
        keyed[key] = r
    if duplicates:
        # Sizes are rounded to what splits evenly over the ranks, so two requested sizes can
        # become one; the later row is kept.
        print(f"warning: {path}: {duplicates} rows repeat an earlier row's key (the same size "
              "after rounding); the later one is compared", file=sys.stderr)
    return doc if isinstance(doc, dict) else {}, keyed


def describe(key):
    impl, algo, op, dtype, redop, root, size, in_place = key
    return (f"{impl} {algo} {op} {dtype} {redop} root {root} {size} B "
            f"{'in place' if in_place else 'out of place'}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--impl", default=None, help="only rows of this implementation")
    parser.add_argument("--min-ratio", type=float, default=None)
    parser.add_argument("--allow-mismatch", action="store_true",
                        help="compare runs whose settings differ (world size, device, ...)")
    args = parser.parse_args()

    old_doc, old = rows_of(args.old)
    new_doc, new = rows_of(args.new)
    for label, doc in (("old", old_doc), ("new", new_doc)):
        if doc:
            print(f"# {label}: {doc.get('world_size', '?')} ranks on {doc.get('hostname', '?')}, "
                  f"{doc.get('iters', '?')} iters"
                  + (f", {doc['date']}" if doc.get("date") else "")
                  + (", fresh input" if doc.get("fresh_input") else ""))
    differences = [f"{what}: {old_doc[field]} against {new_doc[field]}"
                   for field, what in MUST_MATCH
                   if field in old_doc and field in new_doc and old_doc[field] != new_doc[field]]
    if differences:
        print("the runs do not measure the same thing (" + "; ".join(differences) + ")"
              + ("; compared anyway (--allow-mismatch)" if args.allow_mismatch
                 else "; pass --allow-mismatch to compare them anyway"), file=sys.stderr)
        if not args.allow_mismatch:
            return 2
    # Files from before the flag existed have no field: they ran without it.
    if bool(old_doc.get("fresh_input")) != bool(new_doc.get("fresh_input")):
        print("warning: one run rewrote its input before every call (--fresh-input) and the "
              "other did not; their times are not comparable", file=sys.stderr)
    if bool(old_doc.get("allocate_per_call")) != bool(new_doc.get("allocate_per_call")):
        print("warning: one run allocated its buffers around every call (--allocate-per-call) "
              "and the other did not; their times are not comparable", file=sys.stderr)

    def wanted(key):
        return not args.impl or key[0] == args.impl

    print(f"{'impl':>7} {'algo':>14} {'op':>14} {'bytes':>11} {'form':>7} "
          f"{'old GB/s':>9} {'new GB/s':>9} {'new/old':>8}")
    groups = defaultdict(list)
    worst = math.inf
    matched = 0
    for key in sorted(filter(wanted, old.keys() & new.keys()),
                      key=lambda k: (k[0], k[1], k[2], k[7], k[6])):
        impl, algo, op, _, _, _, size, in_place = key
        matched += 1
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
    only_old = sorted(filter(wanted, old.keys() - new.keys()))
    only_new = sorted(filter(wanted, new.keys() - old.keys()))
    if only_old or only_new:
        print(f"\nrows only in {args.old}: {len(only_old)}; only in {args.new}: {len(only_new)}")
        for label, keys in (("only in old", only_old), ("only in new", only_new)):
            for key in keys:
                print(f"  {label}: {describe(key)}")
    if args.min_ratio is not None:
        failures = []
        if matched == 0:
            failures.append("no row of the two files matched")
        if only_old:
            failures.append(f"{len(only_old)} rows of {args.old} are missing from {args.new}")
        if worst < args.min_ratio:
            failures.append(f"worst ratio {worst:.3f} is below {args.min_ratio}")
        if failures:
            print("\n" + "; ".join(failures), file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
