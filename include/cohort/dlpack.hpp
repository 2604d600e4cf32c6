#pragma once

/// Zero-copy exchange of Buffers with numpy, torch, JAX or any DLPack producer/consumer.
/// Both the legacy DLManagedTensor and DLPack 1.x's DLManagedTensorVersioned are supported.
/// This header only forward-declares the DLPack structs, so it compiles without dlpack.h;
/// include <dlpack/dlpack.h> (or cohort/dlpack_versioned.h) to fill them in.

#include <cohort/buffer.hpp>

struct DLManagedTensor;
struct DLManagedTensorVersioned;

namespace cohort {

/// Takes ownership of `tensor`: the returned Buffer views its memory and calls the producer's
/// deleter exactly once, when the last Buffer sharing it goes away. On error the deleter is
/// called before throwing InvalidArgument (lanes != 1, unknown dtype code, bad shape or device).
Buffer from_dlpack(DLManagedTensor* tensor);
/// As above for DLPack >= 1.0. A major version other than ours is rejected: the deleter is called
/// and no other field is read. A read-only flag in the tensor makes the Buffer read-only.
Buffer from_dlpack(DLManagedTensorVersioned* tensor);

/// Exports a view of `buffer`. The buffer's memory stays alive until the consumer calls the
/// returned tensor's deleter. Throws InvalidArgument for dtypes DLPack cannot describe.
DLManagedTensor* to_dlpack(const Buffer& buffer);
/// As above, producing a versioned tensor (DLPack 1.1, whose dtype codes cover fp8 and bool;
/// the read-only flag is set from the Buffer).
DLManagedTensorVersioned* to_dlpack_versioned(const Buffer& buffer);

}  // namespace cohort
