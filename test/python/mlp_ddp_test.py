"""A small MLP trained for 20 steps on torch's CPU, three times in the same processes: gradients
averaged by cohort's GradientSynchronizer, by cohort's plain allreduce(op="avg"), and by
torch.nn.parallel.DistributedDataParallel over gloo. All start from the same weights and see the
same per-rank batches; the weights must end equal within 1e-6. Run with 2 or more ranks.

torch.distributed initialises from the variables cohort-run exports (env://: MASTER_ADDR and a
MASTER_PORT of its own, RANK, WORLD_SIZE), as it would under torchrun.
"""

from harness import check, require, run, world

torch = require("torch")
import torch.distributed as dist  # noqa: E402
from cohort import train  # noqa: E402

STEPS = 20
TOLERANCE = 1e-6


def make_model():
    torch.manual_seed(1234)  # the same initial weights on every rank, for every copy
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 8),
                               torch.nn.Tanh(), torch.nn.Linear(8, 4))


def batch(step, rank):
    """Rank- and step-specific data, the same for all three trainings."""
    generator = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(8, 16, generator=generator), torch.randn(8, 4, generator=generator)


def train_step(model, optimizer, x, y):
    optimizer.zero_grad(set_to_none=False)  # keep each .grad's memory: cohort registered it
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()


def cohort_synchronizer_training(comm):
    model = make_model()
    params = list(model.parameters())
    # Gradients live in cohort's contiguous allocation, so its buckets reduce them in place.
    buffers = train.contiguous_gradients([p.numel() for p in params], "float32")
    for p, b in zip(params, buffers):
        p.grad = torch.from_dlpack(b).view_as(p)
    addresses = [p.grad.data_ptr() for p in params]
    sync = train.GradientSynchronizer(comm, buffers, bucket_cap_bytes=1024,
                                      first_bucket_cap_bytes=256)
    optimizer = torch.optim.SGD(params, lr=0.05, momentum=0.9)
    for step in range(STEPS):
        sync.begin_micro_step()
        train_step(model, optimizer, *batch(step, comm.rank))
        for i in reversed(range(len(params))):  # the order backward produces them
            sync.mark_ready(i)
        sync.finish()
        optimizer.step()
    check([p.grad.data_ptr() for p in params] == addresses,
          "torch moved a gradient out of cohort's registered memory")
    return model


def cohort_allreduce_training(comm):
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in range(STEPS):
        train_step(model, optimizer, *batch(step, comm.rank))
        works = [comm.allreduce_async(p.grad, op="avg") for p in model.parameters()]
        for work in works:
            work.wait()
        optimizer.step()
    return model


def ddp_training(comm):
    model = torch.nn.parallel.DistributedDataParallel(make_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in range(STEPS):
        train_step(model, optimizer, *batch(step, comm.rank))
        optimizer.step()
    return model.module


def max_difference(a, b):
    return max((p - q).abs().max().item() for p, q in zip(a.parameters(), b.parameters()))


def main():
    comm = world()
    check(comm.size >= 2, "run this test with 2 or more ranks")
    dist.init_process_group("gloo")
    check(dist.get_rank() == comm.rank and dist.get_world_size() == comm.size,
          f"torch sees rank {dist.get_rank()} of {dist.get_world_size()}")
    try:
        reference = ddp_training(comm)
        for name, training in (("GradientSynchronizer", cohort_synchronizer_training),
                               ("allreduce(avg)", cohort_allreduce_training)):
            model = training(comm)
            difference = max_difference(model, reference)
            check(difference <= TOLERANCE,
                  f"{name}: weights differ from DDP's by {difference:.3g} (> {TOLERANCE})")
            print(f"{name}: max |w - w_ddp| = {difference:.3g}")
        # Training changed the weights (a test that compares untouched weights proves nothing).
        moved = max_difference(reference, make_model())
        check(moved > 1e-3, f"the weights barely moved ({moved:.3g})")
        # Every rank ends with the same weights.
        weights = torch.cat([p.detach().flatten() for p in reference.parameters()])
        gathered = comm.all_gather_object(weights)
        check(all(torch.equal(weights, other) for other in gathered), "ranks disagree")
    finally:
        comm.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    run(main)
