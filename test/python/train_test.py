"""cohort.train from Python with torch tensors, at 2 or more ranks: GradScaler's agreed skip,
clip_grad_norm against torch's own, set_seed, RngStateSync with torch's generator state,
broadcast_parameters and GradientSynchronizer (accumulation, no_sync, contiguous gradients).
Expected values are written out by hand or come from torch itself, never from cohort.
"""

import math

from harness import check, equal, raises, require, run, world

torch = require("torch")
import cohort  # noqa: E402
from cohort import train  # noqa: E402


def grad_scaler(comm):
    n, r = comm.size, comm.rank
    scaler = train.GradScaler(comm, init_scale=1024.0, growth_interval=1)
    check(scaler.scale == 1024.0, f"initial scale {scaler.scale}")

    # Only the last rank overflows, yet every rank skips and backs off.
    grads = [torch.tensor([1024.0, 2048.0]),
             torch.tensor([float("inf") if r == n - 1 else 512.0])]
    check(not scaler.step(grads), "a step with an inf on one rank is skipped everywhere")
    check(scaler.found_inf(), "found_inf after the agreed unscale")
    scaler.update()
    check(scaler.step_was_skipped and scaler.scale == 512.0, f"backed off to {scaler.scale}")

    # A clean step: gradients divided by the scale in place, then growth after 1 clean step.
    grads = [torch.tensor([512.0, 1024.0]), torch.tensor([256.0])]
    scaler.unscale(grads)
    equal(grads[0], [1.0, 2.0], "unscaled gradients")
    equal(grads[1], [0.5], "unscaled gradients")
    check(scaler.step(grads), "a clean step")
    scaler.update()
    check(scaler.scale == 1024.0, f"grew back to {scaler.scale}")

    # A parameter unused this step on rank 0 only (its p.grad is None): skipped there, as torch's
    # unscale_ skips it; every rank still agrees, and the others' lists are whole.
    grads = [torch.tensor([2048.0]), None if r == 0 else torch.tensor([1024.0])]
    check(scaler.step(grads), "a clean step with a None gradient on rank 0")
    equal(grads[0], [2.0], "unscaled next to a None gradient")
    if r != 0:
        equal(grads[1], [1.0], "unscaled where the gradient exists")
    scaler.update()
    check(scaler.scale == 2048.0, f"grew again to {scaler.scale}")

    # Rank 0's gradients cannot be imported: every rank raises at once (the others waited in
    # the found-inf agreement before), the step is skipped everywhere and update() backs off.
    scale_before = scaler.scale
    grads = 7 if r == 0 else [torch.tensor([1.0])]
    raises(cohort.InvalidArgumentError, lambda: scaler.step(grads),
           "expected a sequence of tensors" if r == 0 else "rank 0 rejected its gradients")
    check(not scaler.step([torch.tensor([1.0])]), "the refused step is skipped on every rank")
    scaler.update()
    check(scaler.scale == scale_before / 2, f"backed off to {scaler.scale} after the refusal")

    state = scaler.state()
    other = train.GradScaler(comm, init_scale=8.0)
    other.load_state(state)
    check(other.state() == state, f"state round trip: {other.state()} != {state}")
    raises(cohort.InvalidUsageError, scaler.update, "no inf checks")
    check(not train.GradScaler(comm, gradient_dtype=torch.bfloat16).enabled,
          "bf16 gradients disable scaling")


def clipping(comm):
    n, r = comm.size, comm.rank
    # The same gradients through cohort and through torch's clip_grad_norm_.
    for norm_type in (2.0, 1.0, math.inf):
        ours = [torch.tensor([3.0, -4.0]), torch.tensor([12.0])]
        params = [torch.nn.Parameter(torch.zeros_like(g)) for g in ours]
        for p, g in zip(params, ours):
            p.grad = g.clone()
        expected_total = torch.nn.utils.clip_grad_norm_(params, 6.5, norm_type=norm_type)
        total = train.clip_grad_norm(ours, 6.5, norm_type)
        check(abs(total - expected_total.item()) < 1e-5, f"norm {norm_type}: total {total}")
        for p, g in zip(params, ours):
            check(torch.allclose(p.grad, g, atol=1e-6), f"norm {norm_type}: {g} vs {p.grad}")

    # Shards of one model: rank r holds [r + 1]; the total is the norm over all ranks.
    shard = [torch.tensor([float(r + 1)])]
    total = train.clip_grad_norm(shard, 1e9, shard_group=comm)
    expected = math.sqrt(sum((k + 1) ** 2 for k in range(n)))
    check(abs(total - expected) < 1e-6, f"sharded norm {total}, expected {expected}")

    # One tensor, as torch's clip_grad_norm_ takes: |[3, 4]| = 5, scaled to norm 1.
    single = torch.tensor([3.0, 4.0])
    total = train.clip_grad_norm(single, 1.0)
    check(abs(total - 5.0) < 1e-6, f"a single tensor's norm {total}")
    check(torch.allclose(single, torch.tensor([0.6, 0.8]), atol=1e-6), f"scaled to {single}")

    # Rank 0's gradients cannot be read: every rank of the shard group raises at once, rather
    # than the others waiting out their timeout in the norm's exchange.
    bad = 7 if r == 0 else [torch.tensor([1.0])]
    raises(cohort.InvalidArgumentError,
           lambda: train.clip_grad_norm(bad, 1.0, shard_group=comm, timeout=60),
           "expected a sequence of tensors" if r == 0 else "shard group rejected")
    # The last rank's max_norm is not a number: it raises that, the others at once too.
    raises(cohort.InvalidArgumentError,
           lambda: train.clip_grad_norm([torch.tensor([1.0])], None if r == n - 1 else 1.0,
                                        shard_group=comm, timeout=60),
           "max_norm must be a number" if r == n - 1 else "shard group rejected")
    # A bool tensor has __float__ but is no number of seconds.
    raises(cohort.InvalidArgumentError,
           lambda: comm.allreduce(torch.zeros(1), timeout=torch.tensor(True)), "timeout must be")
    # The last rank asks for another norm: every rank raises, naming it, nothing is clipped.
    kept = [torch.tensor([3.0, 4.0])]
    raises(cohort.InvalidArgumentError,
           lambda: train.clip_grad_norm(kept, 1.0, math.inf if r == n - 1 else 2.0,
                                        shard_group=comm, timeout=60),
           f"rank(s) {n - 1} of the shard group passed another norm_type")
    equal(kept[0], [3.0, 4.0], "not clipped after differing norm types")

    g = [torch.tensor([-3.0, 0.5, 7.0])]
    train.clip_grad_value(g, 1.0)
    equal(g[0], [-1.0, 0.5, 1.0], "clip_grad_value")

    # None gradients (unused parameters, on one rank only) are left out, as torch leaves them.
    with_none = [torch.tensor([3.0]), None] if r == 0 else [torch.tensor([3.0])]
    total = train.clip_grad_norm(with_none + [torch.tensor([4.0])], 1e9, shard_group=comm)
    check(abs(total - 5.0 * math.sqrt(n)) < 1e-5, f"norm beside a None gradient: {total}")
    g = [None, torch.tensor([-3.0])]
    train.clip_grad_value(g, 1.0)
    equal(g[1], [-1.0], "clip_grad_value beside a None gradient")
    # An error names the gradient by its place in the caller's list, the None counted.
    raises(cohort.InvalidArgumentError,
           lambda: train.clip_grad_norm([None, torch.zeros(2, dtype=torch.int64)], 1.0),
           "gradient 1")


def randomness(comm):
    n, r = comm.size, comm.rank
    seed = train.set_seed(comm, 42, device_specific=True, apply=torch.manual_seed)
    check(seed == 42 + r and torch.initial_seed() == 42 + r, f"set_seed gave {seed}")
    derived = train.derive_seed(7, 1, 2)
    check(comm.all_gather_object(derived) == [derived] * n, "derive_seed differs across ranks")
    check(train.derive_seed(7, 2, 2) != derived, "another stream, another seed")

    # torch's generator state, broadcast from rank 1: afterwards every rank draws what a
    # generator seeded like rank 1 draws.
    source = 1
    torch.manual_seed(100 + r)
    expected = torch.rand(4, generator=torch.Generator().manual_seed(100 + source))
    sync = train.RngStateSync()
    sync.add("torch_cpu", lambda: torch.get_rng_state().numpy().tobytes(),
             lambda state: torch.set_rng_state(torch.frombuffer(bytearray(state),
                                                                dtype=torch.uint8)))
    sync.synchronize(comm, root=source)
    check(torch.equal(torch.rand(4), expected), "torch.rand after RngStateSync")

    # The packaged helper, with a torch.Generator of its own.
    generator = torch.Generator().manual_seed(500 + r)
    helper = train.RngStateSync()
    train.add_torch_generator(helper, "data", generator)
    helper.synchronize(comm, ["data"], root=0)
    expected = torch.rand(3, generator=torch.Generator().manual_seed(500))
    check(torch.equal(torch.rand(3, generator=generator), expected), "add_torch_generator")
    check(helper.names() == ["data"], f"names {helper.names()}")

    # A getter raising on the root: the root gets its own exception, the others RemoteError.
    failing = train.RngStateSync()

    def broken():
        raise KeyError("no such generator state")
    failing.add("broken", broken, lambda state: None)
    if r == 0:
        raises(KeyError, lambda: failing.synchronize(comm), "no such generator state")
    else:
        raises(cohort.RemoteError, lambda: failing.synchronize(comm), "no such generator state")

    # Names that differ across ranks are refused on every rank before any setter runs.
    mismatched = train.RngStateSync()
    installed = []
    mismatched.add(f"gen{r}", lambda: b"x", installed.append)
    raises(cohort.InvalidArgumentError, lambda: mismatched.synchronize(comm), "gen")
    check(installed == [], "no setter ran")


def gradients(comm):
    n, r = comm.size, comm.rank
    # broadcast_parameters: rank 0's values everywhere (parameters detached: they require grad).
    layer = torch.nn.Linear(3, 2)
    with torch.no_grad():
        layer.weight.fill_(r + 1.0)
        layer.bias.fill_(-(r + 1.0))
    train.broadcast_parameters(comm, [p.detach() for p in layer.parameters()], root=0)
    equal(layer.weight.flatten(), [1.0] * 6, "broadcast_parameters weight")
    equal(layer.bias, [-1.0] * 2, "broadcast_parameters bias")
    # The last rank's parameters cannot be read: every rank raises at once (the others waited
    # in the layout agreement before).
    bad = 7 if r == n - 1 else [p.detach() for p in layer.parameters()]
    raises(cohort.InvalidArgumentError, lambda: train.broadcast_parameters(comm, bad, root=0),
           "expected a sequence of tensors" if r == n - 1 else f"ranks {n - 1} rejected")

    # GradientSynchronizer over contiguous gradients viewed by torch, 2 micro-steps per step.
    sizes = [4, 7, 1]
    buffers = train.contiguous_gradients(sizes, "float32")
    grads = [torch.from_dlpack(b) for b in buffers]
    check(grads[1].data_ptr() == grads[0].data_ptr() + 16, "contiguous gradients are adjacent")
    sync = train.GradientSynchronizer(comm, buffers, accumulation_steps=2,
                                      first_bucket_cap_bytes=8, bucket_cap_bytes=8)
    check(len(sync.buckets) >= 2, f"several buckets: {sync.buckets}")
    check(sync.loss_multiplier == 0.5, "loss multiplier 1 / accumulation_steps")
    for micro in range(2):
        steps = sync.begin_micro_step()
        check(steps == (micro == 1), f"micro-step {micro}: optimizer steps = {steps}")
        for i, g in enumerate(grads):  # the engine accumulates: rank r adds (r + 1)(i + 1)
            g += (r + 1) * (i + 1)
            sync.mark_ready(i)
        sync.finish()
    # After 2 micro-steps each rank holds 2 (r + 1)(i + 1); the average over ranks.
    for i, g in enumerate(grads):
        equal(g, [2 * (i + 1) * (n + 1) / 2] * sizes[i], f"averaged gradient {i}")

    # Inside no_sync() nothing is communicated, whatever the step counter says.
    for g in grads:
        g.fill_(float(r))
    with sync.no_sync():
        check(not sync.begin_micro_step(end_of_data=True), "no_sync never syncs")
        for i in range(len(grads)):
            sync.mark_ready(i)
        sync.finish()
    equal(grads[0], [float(r)] * 4, "gradients untouched in no_sync")

    # Plain torch gradients (separate allocations) are staged through buckets.
    plain = [torch.full((5,), float(r)), torch.full((3,), 2.0 * r)]
    staged = train.GradientSynchronizer(comm, plain)
    staged.begin_micro_step()
    staged.mark_ready(1)
    staged.mark_ready(0)
    staged.finish()
    equal(plain[0], [(n - 1) / 2] * 5, "staged average")
    equal(plain[1], [float(n - 1)] * 3, "staged average")
    # A rank whose arguments cannot be converted (a None gradient, a fractional bucket cap)
    # raises its own error and every other rank raises at once, rather than waiting out its
    # timeout in the registration's comparison.
    for bad_arguments, own_error in (
            (dict(grads=[torch.zeros(2), None]), "got None"),
            (dict(grads=[torch.zeros(2)], bucket_cap_bytes=1.5), "bucket_cap_bytes must be an int"),
            (dict(grads=[torch.zeros(2)], communication_dtype="float31"), "float31"),
            (dict(grads=[torch.zeros(2)], sync_each_batch="yes"), "sync_each_batch must be")):
        good_arguments = dict(grads=[torch.zeros(2)])
        arguments = bad_arguments if r == n - 1 else good_arguments
        raises(cohort.InvalidArgumentError,
               lambda: train.GradientSynchronizer(comm, timeout=60, **arguments),
               own_error if r == n - 1 else f"ranks {n - 1} rejected")
    # Integer gradients are refused on every rank (the registration is compared collectively).
    raises(cohort.InvalidArgumentError,
           lambda: train.GradientSynchronizer(comm, [torch.zeros(2, dtype=torch.int64)]),
           "int64")


def main():
    comm = world()
    check(comm.size >= 2, "run this test with 2 or more ranks")
    grad_scaler(comm)
    clipping(comm)
    randomness(comm)
    gradients(comm)
    comm.barrier()


if __name__ == "__main__":
    run(main)
