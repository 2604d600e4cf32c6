#!/usr/bin/env python3
"""torch.distributed's gloo backend under the same sweep as cohort-bench, for side-by-side rows.

cohort-bench measures Open MPI and Gloo inside its own processes (--peer); torch is a Python
library, so it gets this script instead. Run it under cohort-run (which sets torchrun's RANK,
WORLD_SIZE and MASTER_PORT) right before or after cohort-bench with the same sizes:

    cohort-run -n 3 -- /usr/bin/python3 bench/torch_gloo/torch_gloo_allreduce.py -b 4 -e 16M -f 4

Rows follow cohort-bench's columns for float32 sum allreduce (torch's all_reduce is in place
only): size, count, time in us (mean over ranks), algbw, busbw, #wrong. Each size is checked
against the sum of the ranks' values before it is timed.
"""

import argparse
import os
import sys
import tempfile
import time

try:
    import torch
    import torch.distributed as dist
except ImportError as error:  # the caller decides whether a missing torch is a skip
    print(f"torch_gloo_allreduce: torch.distributed is not importable: {error}", file=sys.stderr)
    sys.exit(3)

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_bytes(text):
    text = text.strip().upper()
    if text and text[-1] in UNITS:
        return int(text[:-1]) * UNITS[text[-1]]
    return int(text)


def environment_int(name):
    value = os.environ.get(name)
    if value is None:
        sys.exit(f"torch_gloo_allreduce: {name} is not set; run under cohort-run or torchrun")
    return int(value)


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

    rank = environment_int("RANK")
    world = environment_int("WORLD_SIZE")
    # cohort-run's own store holds MASTER_PORT, so torch rendezvouses through a file named after it.
    job = os.environ.get("MASTER_PORT", "0") + "-" + os.environ.get("COHORT_TOKEN", "")[:12]
    store_file = os.path.join(tempfile.gettempdir(), f"cohort-torch-gloo-{job}")
    dist.init_process_group("gloo", init_method="file://" + store_file, rank=rank,
                            world_size=world)
    torch.set_num_threads(1)  # the ranks already share the cores

    if rank == 0:
        print(f"# torch {torch.__version__} gloo allreduce float sum, world size {world}, "
              f"warmup {args.warmup}, iters {args.iters}")
        print("#       size        count      time   algbw   busbw  #wrong  impl")
    failures = 0
    size = parse_bytes(args.minbytes)
    while size <= parse_bytes(args.maxbytes):
        count = max(1, size // 4)
        tensor = torch.full((count,), float(rank + 1), dtype=torch.float32)
        dist.all_reduce(tensor)
        wrong = int((tensor != float(world * (world + 1) // 2)).sum())
        tensor.zero_()  # a timed loop of sums then stays finite
        for _ in range(args.warmup):
            dist.all_reduce(tensor)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(args.iters):
            dist.all_reduce(tensor)
        elapsed = (time.perf_counter() - start) / args.iters
        totals = torch.tensor([elapsed, float(wrong)], dtype=torch.float64)
        dist.all_reduce(totals)
        seconds = totals[0].item() / world
        wrong_total = int(totals[1].item())
        failures += wrong_total
        nbytes = count * 4
        algbw = nbytes / seconds / 1e9
        busbw = algbw * 2 * (world - 1) / world
        if rank == 0:
            print(f"{nbytes:12d} {count:12d} {seconds * 1e6:9.2f} {algbw:7.2f} {busbw:7.2f} "
                  f"{wrong_total:7d}  torch-gloo", flush=True)
        size *= args.stepfactor

    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        # torch's FileStore removes its file when the last rank lets go of it, which may be
        # another rank, at any moment now: gone already is fine.
        try:
            os.unlink(store_file)
        except FileNotFoundError:
            pass
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
