#!/usr/bin/env python3
"""Runs bench/torch_gloo/torch_gloo_allreduce.py under cohort-run and checks its rows.

Exits 77 (meson: skipped, and reported as such) when this Python has no torch.distributed with
gloo: python3-torch is a peer for measurements, not a dependency of cohort.
"""

import subprocess
import sys

launcher, script, ranks = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    import torch.distributed as dist
except ImportError as error:
    print(f"skipped: {sys.executable} cannot import torch.distributed ({error})")
    sys.exit(77)
if not dist.is_available() or not dist.is_gloo_available():
    print(f"skipped: {sys.executable}'s torch has no gloo backend")
    sys.exit(77)

sizes = [4, 64, 1024, 16384]
run = subprocess.run(
    [launcher, "-n", ranks, "--", sys.executable, script, "-b", "4", "-e", "16K", "-f", "16",
     "-w", "1", "-n", "3"],
    capture_output=True, text=True, timeout=240)
print(run.stdout)
print(run.stderr, file=sys.stderr)
if run.returncode != 0:
    sys.exit(f"torch_gloo_allreduce under {ranks} ranks exited with {run.returncode}")

rows = []
for line in run.stdout.splitlines():
    fields = line.split("]", 1)[-1].split()
    if fields and not fields[0].startswith("#"):
        rows.append(fields)
seen = [int(r[0]) for r in rows]
if seen != sizes:
    sys.exit(f"expected rows for sizes {sizes}, got {seen}")
for r in rows:
    if r[-1] != "torch-gloo" or float(r[2]) <= 0 or int(r[5]) != 0:
        sys.exit(f"bad row (time must be positive, #wrong 0): {' '.join(r)}")
print(f"ok: {len(rows)} rows at {ranks} ranks, all checked")
