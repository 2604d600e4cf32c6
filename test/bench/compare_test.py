#!/usr/bin/env python3
"""bench/compare.py against two hand-written result files: the ratios it prints are worked out
here (old time / new time); --min-ratio fails exactly when a row got slower than allowed, a row
of OLD is missing from NEW, or nothing matched; runs of different world sizes are refused."""

import json
import os
import subprocess
import sys
import tempfile

compare = sys.argv[1]


def row(size, time_us, in_place=False, impl="cohort"):
    return {"impl": impl, "algo": "auto", "op": "allreduce", "dtype": "float", "redop": "sum",
            "size_bytes": size, "in_place": in_place, "time_us": time_us,
            "busbw_gbps": size / time_us / 1e3}


old = {"world_size": 2, "rows": [row(1024, 10.0), row(1 << 20, 400.0), row(1 << 20, 500.0, True),
                                 row(4096, 7.0)]}
new = {"world_size": 2, "rows": [row(1024, 5.0), row(1 << 20, 800.0), row(1 << 20, 500.0, True),
                                 row(8192, 9.0)]}
with tempfile.TemporaryDirectory() as d:
    paths = []
    for name, doc in (("old", old), ("new", new)):
        paths.append(os.path.join(d, name + ".json"))
        with open(paths[-1], "w") as f:
            json.dump(doc, f)
    out = subprocess.run([sys.executable, compare] + paths, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    # 1 KiB: 10 us -> 5 us is 2x faster; 1 MiB out of place 400 -> 800 us is 0.5; in place equal.
    assert any(" 1024 " in l and l.rstrip().endswith("2.00") for l in lines), out.stdout
    assert any(" 1048576 " in l and " out " in l and l.rstrip().endswith("0.50") for l in lines), out.stdout
    assert any(" 1048576 " in l and "inplace" in l and l.rstrip().endswith("1.00") for l in lines), out.stdout
    # Out of place: geometric mean of 2 and 0.5 is 1.
    assert any("allreduce out: 1.000 over 2 sizes" in l for l in lines), out.stdout
    assert any("only in" in l and ": 1;" in l for l in lines), out.stdout
    # The row only OLD has is named, not just counted.
    assert any("only in old" in l and " 4096 B " in l for l in lines), out.stdout
    gate = subprocess.run([sys.executable, compare] + paths + ["--min-ratio", "0.6"],
                          capture_output=True, text=True)
    assert gate.returncode == 1, "a 0.5 row passed a 0.6 gate"
    # Every ratio is above 0.4, but OLD's 4096 B row is missing from NEW: still a failure.
    gate = subprocess.run([sys.executable, compare] + paths + ["--min-ratio", "0.4"],
                          capture_output=True, text=True)
    assert gate.returncode == 1 and "missing from" in gate.stderr, gate.stderr
    trimmed = os.path.join(d, "trimmed.json")
    with open(trimmed, "w") as f:
        json.dump(dict(old, rows=old["rows"][:3]), f)
    gate = subprocess.run([sys.executable, compare, trimmed, paths[1], "--min-ratio", "0.4"],
                          capture_output=True, text=True)
    assert gate.returncode == 0, gate.stderr
    # Files that share no row (another dtype) pass no gate.
    other_dtype = os.path.join(d, "double.json")
    with open(other_dtype, "w") as f:
        json.dump(dict(new, rows=[dict(r, dtype="double") for r in new["rows"]]), f)
    gate = subprocess.run([sys.executable, compare, trimmed, other_dtype, "--min-ratio", "0.4"],
                          capture_output=True, text=True)
    assert gate.returncode == 1 and "no row" in gate.stderr, gate.stderr
    # Different world sizes measure different things: refused unless asked for.
    four = os.path.join(d, "four.json")
    with open(four, "w") as f:
        json.dump(dict(new, world_size=4), f)
    refused = subprocess.run([sys.executable, compare, paths[0], four], capture_output=True,
                             text=True)
    assert refused.returncode == 2 and "world size: 2 against 4" in refused.stderr, refused.stderr
    forced = subprocess.run([sys.executable, compare, paths[0], four, "--allow-mismatch"],
                            capture_output=True, text=True)
    assert forced.returncode == 0 and "compared anyway" in forced.stderr, forced.stderr
    # Rows of another root are other rows.
    rooted = os.path.join(d, "rooted.json")
    with open(rooted, "w") as f:
        json.dump(dict(new, rows=[dict(r, root=1) for r in new["rows"]]), f)
    other_root = subprocess.run([sys.executable, compare, paths[1], rooted], capture_output=True,
                                text=True)
    assert "only in new" in other_root.stdout and "root 1" in other_root.stdout, other_root.stdout
    assert "fresh-input" not in out.stderr, out.stderr
    assert "allocate-per-call" not in out.stderr, out.stderr
    # A run made with one of these flags against a plain one: the same ratios, and a warning
    # naming that flag only.
    for field, flag, other in (("fresh_input", "--fresh-input", "--allocate-per-call"),
                               ("allocate_per_call", "--allocate-per-call", "--fresh-input")):
        with open(paths[1], "w") as f:
            json.dump(dict(new, **{field: True}), f)
        mixed = subprocess.run([sys.executable, compare] + paths, capture_output=True, text=True)
        assert mixed.returncode == 0, mixed.stderr
        assert flag in mixed.stderr and "not comparable" in mixed.stderr, mixed.stderr
        assert other not in mixed.stderr, mixed.stderr
        assert any(" 1024 " in l and l.rstrip().endswith("2.00")
                   for l in mixed.stdout.splitlines()), mixed.stdout
        if field == "fresh_input":
            assert "fresh input" in mixed.stdout, mixed.stdout
print("compare.py: ratios, gate, mismatch refusal and the fresh-input and allocate-per-call "
      "warnings verified")
