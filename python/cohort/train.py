"""cohort.train: the training layer of include/cohort/train/ for Python engines.

Mixed precision (GradScaler), data-parallel gradient averaging (GradientSynchronizer,
broadcast_parameters, contiguous_gradients), clipping (clip_grad_norm, clip_grad_value),
randomness kept in step across ranks (set_seed, derive_seed, RngStateSync) and the byte
collectives under cohort's object collectives. Gradients and parameters are any tensors with
__dlpack__ (torch: pass p.grad, and p.detach() for parameters, which require grad). Semantics,
defaults and the references each follows are those of the C++ headers; see each docstring.
"""

from ._cohort.train import (  # noqa: F401  (re-exported)
    GradientSynchronizer,
    GradScaler,
    NoSyncWindow,
    RngStateSync,
    allgather_bytes,
    broadcast_bytes,
    broadcast_parameters,
    clip_grad_norm,
    clip_grad_value,
    contiguous_gradients,
    derive_seed,
    gather_bytes,
    set_seed,
)


def add_torch_generator(sync, name="torch_cpu", generator=None):
    """Registers a torch.Generator (default: torch's global CPU generator) with the RngStateSync
    ``sync`` under ``name``: its state travels as the bytes of ``generator.get_state()``."""
    import torch  # pylint: disable=import-outside-toplevel  (torch is optional for cohort)

    source = torch.default_generator if generator is None else generator

    def get_state():
        return source.get_state().numpy().tobytes()

    def set_state(state):
        source.set_state(torch.frombuffer(bytearray(state), dtype=torch.uint8))

    sync.add(name, get_state, set_state)


__all__ = [
    "GradScaler", "GradientSynchronizer", "NoSyncWindow", "RngStateSync", "add_torch_generator",
    "allgather_bytes", "broadcast_bytes", "broadcast_parameters", "clip_grad_norm",
    "clip_grad_value", "contiguous_gradients", "derive_seed", "gather_bytes", "set_seed",
]
