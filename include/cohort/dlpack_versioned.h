#ifndef COHORT_DLPACK_VERSIONED_H_
#define COHORT_DLPACK_VERSIONED_H_

/// The DLPack structs cohort exchanges, whatever dlpack.h the system ships.
///
/// DLPack 1.0 added DLManagedTensorVersioned (a version, flags, then the tensor), and 1.1 added
/// type codes for bool and fp8. Older headers (0.6 in Debian 12) lack them; this header declares
/// what is missing with the layout the 1.x ABI fixes, so code written against 1.x compiles either
/// way. With a 1.x dlpack.h nothing here is redeclared.

#include <dlpack/dlpack.h>
#include <stdint.h>

/// The DLPack ABI version cohort produces and accepts (major must match on import). Minor 1
/// because exported tensors may use the bool and fp8 type codes introduced in 1.1.
#define COHORT_DLPACK_MAJOR_VERSION 1
#define COHORT_DLPACK_MINOR_VERSION 1

#if !defined(DLPACK_MAJOR_VERSION)
/* A pre-1.0 dlpack.h: it versions itself with DLPACK_VERSION only. */

#ifdef __cplusplus
extern "C" {
#endif

/// ABI version of a DLManagedTensorVersioned. A consumer must reject (and release through the
/// deleter) any tensor whose major differs from its own; minor versions only add enum values.
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

/// DLPack 1.x's managed tensor. The fields up to and including `flags` keep their offsets in every
/// future major version, so `deleter` can always be called safely.
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  /// Producer's private context (may be null).
  void* manager_ctx;
  /// Releases the tensor and everything it references, including this struct. May be null.
  void (*deleter)(struct DLManagedTensorVersioned* self);
  /// Bitwise OR of DLPACK_FLAG_BITMASK_* values.
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

#ifdef __cplusplus
}
#endif

/// The consumer must not write through the tensor.
#define DLPACK_FLAG_BITMASK_READ_ONLY (UINT64_C(1) << 0)
/// The producer made a copy that the consumer now owns alone.
#define DLPACK_FLAG_BITMASK_IS_COPIED (UINT64_C(1) << 1)

#endif /* !DLPACK_MAJOR_VERSION */

/* Type codes newer than some headers' DLDataTypeCode enum. They are plain integer constants
 * here because DLDataType.code is a uint8_t; a 1.1 header's enumerators are used when present. */
#if !defined(DLPACK_MAJOR_VERSION) || (DLPACK_MAJOR_VERSION == 1 && DLPACK_MINOR_VERSION < 1)
#define COHORT_DL_BOOL 6
#define COHORT_DL_FLOAT8_E4M3FN 10
#define COHORT_DL_FLOAT8_E5M2 12
#else
#define COHORT_DL_BOOL kDLBool
#define COHORT_DL_FLOAT8_E4M3FN kDLFloat8_e4m3fn
#define COHORT_DL_FLOAT8_E5M2 kDLFloat8_e5m2
#endif

#endif /* COHORT_DLPACK_VERSIONED_H_ */
