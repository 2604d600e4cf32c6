#!/usr/bin/env python3
"""cohort's Python allreduce against torch.distributed's gloo backend, in the same processes.

Both reduce the same torch float32 tensor in place with a sum: cohort through the Python module
(DLPack import of the tensor on every call, GIL released while the collective runs),
torch through dist.all_reduce. Each size is checked against the sum of the ranks' values before it
is timed. Run it under cohort-run (or torchrun):

    cohort-run -n 2 -- /usr/bin/python3 bench/torch_gloo/cohort_python_allreduce.py -b 4 -e 16M -f 4

with build/python (or the installed module) on PYTHONPATH. Rows: size in bytes, count, mean time
per call in us over ranks for cohort and for torch gloo, torch / cohort, and the number of wrong
elements (both). torch's file store lives in a directory rank 0 creates and sends to the others
with cohort's broadcast_object (cohort-run's own store holds MASTER_PORT).

Exit codes: 0, 1 when a result was wrong, 77 when torch.distributed or cohort is not importable
(the test suite's "skipped").
"""

import argparse
import os
import shutil
import sys
import tempfile
import time

try:
    import torch
    import torch.distributed as dist
    import cohort
except ImportError as error:
    print(f"skipped: {sys.executable} cannot import torch.distributed or cohort: {error}")
    sys.exit(77)

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_bytes(text):
    text = text.strip().upper()
    if text and text[-1] in UNITS:
        return int(text[:-1]) * UNITS[text[-1]]
    return int(text)


def timed(call, tensor, warmup, iters, barrier):
    """Mean seconds per call(tensor) on this rank, after warmup calls and a barrier."""
    for _ in range(warmup):
        call(tensor)
    barrier()
    start = time.perf_counter()
    for _ in range(iters):
        call(tensor)
    return (time.perf_counter() - start) / iters


def wrong_elements(call, count, rank, world):
    tensor = torch.full((count,), float(rank + 1), dtype=torch.float32)
    call(tensor)
    return int((tensor != float(world * (world + 1) // 2)).sum())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-b", "--minbytes", default="4")
    parser.add_argument("-e", "--maxbytes", default="16M")
    parser.add_argument("-f", "--stepfactor", type=int, default=4)
    parser.add_argument("-w", "--warmup", type=int, default=5)
    parser.add_argument("-n", "--iters", type=int, default=20)
    args = parser.parse_args()
    if args.stepfactor < 2:
        parser.error("--stepfactor must be at least 2")

    torch.set_num_threads(1)  # the ranks already share the cores
    comm = cohort.init()
    rank, world = comm.rank, comm.size
    directory = comm.broadcast_object(tempfile.mkdtemp(prefix="cohort-gloo-") if rank == 0
                                      else None)
    dist.init_process_group("gloo", init_method="file://" + os.path.join(directory, "store"),
                            rank=rank, world_size=world)

    def cohort_allreduce(tensor):
        comm.allreduce(tensor)

    def gloo_allreduce(tensor):
        dist.all_reduce(tensor)

    if rank == 0:
        print(f"# cohort {cohort.__version__} (Python) vs torch {torch.__version__} gloo, "
              f"allreduce float sum in place, world size {world}, warmup {args.warmup}, "
              f"iters {args.iters}")
        print("#       size        count   cohort(us)    gloo(us)  gloo/cohort  #wrong")
    failures = 0
    size = parse_bytes(args.minbytes)
    while size <= parse_bytes(args.maxbytes):
        count = max(1, size // 4)
        wrong = (wrong_elements(cohort_allreduce, count, rank, world) +
                 wrong_elements(gloo_allreduce, count, rank, world))
        tensor = torch.zeros(count, dtype=torch.float32)  # sums of zeros stay finite
        ours = timed(cohort_allreduce, tensor, args.warmup, args.iters, comm.barrier)
        theirs = timed(gloo_allreduce, tensor, args.warmup, args.iters, comm.barrier)
        totals = torch.tensor([ours, theirs, float(wrong)], dtype=torch.float64)
        comm.allreduce(totals)
        ours, theirs = totals[0].item() / world, totals[1].item() / world
        wrong_total = int(totals[2].item())
        failures += wrong_total
        if rank == 0:
            print(f"{count * 4:12d} {count:12d} {ours * 1e6:12.2f} {theirs * 1e6:11.2f} "
                  f"{theirs / ours:12.1f} {wrong_total:7d}", flush=True)
        size *= args.stepfactor

    comm.barrier()
    dist.destroy_process_group()
    comm.barrier()
    if rank == 0:
        shutil.rmtree(directory, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
