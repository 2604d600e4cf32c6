"""The DLPack protocol between cohort.Buffer and numpy 1.24 / torch 1.13, in one process:
zero-copy both ways (data pointers compared), the capsule kinds and their names before and after
consumption, ownership (the producer's object is released exactly when the last Buffer goes),
read-only handling, copy=, dl_device= and stream=, and the versioned (DLPack 1.x) path, which
these numpy and torch versions do not produce, through a producer written here.
"""

import ctypes
import gc
import sys

from harness import check, equal, raises, require, run

np, torch = require("numpy", "torch")
import cohort  # noqa: E402

PyCapsule_GetName = ctypes.pythonapi.PyCapsule_GetName
PyCapsule_GetName.restype = ctypes.c_char_p
PyCapsule_GetName.argtypes = [ctypes.py_object]
PyCapsule_GetPointer = ctypes.pythonapi.PyCapsule_GetPointer
PyCapsule_GetPointer.restype = ctypes.c_void_p
PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def capsule_name(capsule):
    return PyCapsule_GetName(capsule).decode()


class VersionedOnly:
    """A DLPack 1.x producer: hands out cohort.Buffer's versioned capsule, and refuses to be
    asked without max_version (as a strict 1.x-only producer would)."""

    def __init__(self, buffer):
        self.buffer = buffer
        self.calls = []

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls.append(max_version)
        if max_version is None:
            raise TypeError("this producer speaks DLPack 1.x only")
        return self.buffer.__dlpack__(max_version=max_version)

    def __dlpack_device__(self):
        return self.buffer.__dlpack_device__()


def exports():
    buffer = cohort.Buffer.allocate((2, 3), "float32")
    check(buffer.__dlpack_device__() == (1, 0), "CPU is DLPack device (1, 0)")

    tensor = torch.from_dlpack(buffer)
    check(tensor.data_ptr() == buffer.data_ptr, "torch.from_dlpack(Buffer) copied")
    check(tuple(tensor.shape) == (2, 3) and tensor.dtype == torch.float32, f"{tensor}")
    tensor.copy_(torch.arange(6.0).view(2, 3))
    array = np.from_dlpack(buffer)
    check(array.ctypes.data == buffer.data_ptr, "numpy.from_dlpack(Buffer) copied")
    equal(array.flatten(), [0, 1, 2, 3, 4, 5], "numpy sees torch's writes")

    # The Buffer's memory outlives the Buffer while a consumer holds it.
    keeper = torch.from_dlpack(cohort.Buffer.allocate(1000, "int64"))
    gc.collect()
    keeper.fill_(7)
    check(int(keeper.sum()) == 7000, "a consumer's view outlives its Buffer")

    for dtype, torch_dtype in (("bfloat16", torch.bfloat16), ("int64", torch.int64),
                               ("float16", torch.float16), ("uint8", torch.uint8)):
        exported = torch.from_dlpack(cohort.Buffer.allocate(3, dtype))
        check(exported.dtype == torch_dtype, f"{dtype} exported as {exported.dtype}")

    # Capsules: legacy by default, versioned on request; an unconsumed one releases itself.
    legacy = buffer.__dlpack__()
    check(capsule_name(legacy) == "dltensor", capsule_name(legacy))
    versioned = buffer.__dlpack__(max_version=(1, 0))
    check(capsule_name(versioned) == "dltensor_versioned", capsule_name(versioned))
    del legacy, versioned

    # Read-only: legacy capsules cannot say so, versioned ones can.
    read_only = buffer.as_read_only()
    raises(BufferError, read_only.__dlpack__, "read-only")
    check(capsule_name(read_only.__dlpack__(max_version=(1, 1))) == "dltensor_versioned", "")
    imported = cohort.Buffer.from_dlpack(VersionedOnly(read_only))
    check(imported.read_only and imported.data_ptr == buffer.data_ptr,
          "the versioned read-only flag survives a round trip")

    # copy=True: new memory with the same contents; dl_device and stream are checked.
    copied = torch.from_dlpack(_CopyingProducer(buffer))
    check(copied.data_ptr() != buffer.data_ptr, "copy=True did not copy")
    equal(copied.flatten(), [0, 1, 2, 3, 4, 5], "copied contents")
    raises(BufferError, lambda: buffer.__dlpack__(dl_device=(2, 0)), "cannot be exported")
    raises(BufferError, lambda: buffer.__dlpack__(stream=1), "stream must be None")


class _CopyingProducer:
    """Asks cohort.Buffer for a copy, as a consumer passing copy=True would."""

    def __init__(self, buffer):
        self.buffer = buffer

    def __dlpack__(self, stream=None):
        return self.buffer.__dlpack__(copy=True)

    def __dlpack_device__(self):
        return self.buffer.__dlpack_device__()


def imports():
    # numpy and torch producers: the same memory, and the producer kept alive exactly as long as
    # a Buffer shares it.
    array = np.arange(12, dtype=np.int32).reshape(3, 4)
    references = sys.getrefcount(array)
    buffer = cohort.Buffer.from_dlpack(array)
    check(buffer.data_ptr == array.ctypes.data and buffer.shape == (3, 4), f"{buffer}")
    check(buffer.dtype == cohort.DType.int32, f"{buffer.dtype}")
    check(sys.getrefcount(array) == references + 1, "the Buffer holds the array")
    view = buffer.slice(1, 3)
    del buffer
    check(sys.getrefcount(array) == references + 1, "a slice keeps the array alive")
    del view
    check(sys.getrefcount(array) == references, "the last Buffer released the array")

    tensor = torch.arange(6, dtype=torch.bfloat16)
    buffer = cohort.Buffer.from_dlpack(tensor)
    check(buffer.data_ptr == tensor.data_ptr() and buffer.dtype == cohort.DType.bfloat16, "")
    transposed = cohort.Buffer.from_dlpack(torch.zeros(3, 4).t())
    check(not transposed.is_contiguous() and transposed.strides == (1, 4), f"{transposed.strides}")

    # The capsule a producer hands over is consumed: renamed, so it cannot be used twice.
    capsule = torch.arange(3.0).__dlpack__()

    class Once:
        def __dlpack__(self, stream=None):
            return capsule

    cohort.Buffer.from_dlpack(Once())
    check(capsule_name(capsule) == "used_dltensor", capsule_name(capsule))
    raises(cohort.InvalidArgumentError, lambda: cohort.Buffer.from_dlpack(Once()),
           "used_dltensor")

    # A versioned producer is asked with max_version first.
    producer = VersionedOnly(cohort.Buffer.allocate(5, "float64"))
    check(cohort.Buffer.from_dlpack(producer).count == 5 and producer.calls == [(1, 1)],
          f"calls {producer.calls}")

    # A producer that hands over a copy (DLPack 1.x's is-copied flag) gets its own tensor back
    # from every op, never the copy: cohort must not write results there.
    class Copying(VersionedOnly):
        def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
            capsule = super().__dlpack__(max_version=max_version)
            managed = PyCapsule_GetPointer(capsule, b"dltensor_versioned")
            # DLManagedTensorVersioned: version (two uint32), manager_ctx, deleter, then flags.
            flags = ctypes.c_uint64.from_address(managed + 8 + 2 * ctypes.sizeof(ctypes.c_void_p))
            flags.value |= 2  # DLPACK_FLAG_BITMASK_IS_COPIED
            return capsule

    check(not cohort.Buffer.from_dlpack(VersionedOnly(cohort.Buffer.allocate(2, "float32"))
                                        ).read_only, "a shared tensor imported read-only")
    check(cohort.Buffer.from_dlpack(Copying(cohort.Buffer.allocate(2, "float32"))).read_only,
          "a producer's copy imported writable")

    # What DLPack cannot carry, the buffer protocol does (numpy 1.24 and bool / read-only).
    flags = cohort.Buffer.from_dlpack(np.array([True, False]))
    check(flags.dtype == cohort.DType.bool, f"{flags.dtype}")
    frozen = np.ones(3)
    frozen.flags.writeable = False
    check(cohort.Buffer.from_dlpack(frozen).read_only, "read-only array imported writable")
    check(cohort.Buffer.from_dlpack(bytearray(8)).dtype == cohort.DType.uint8, "bytearray")
    raises(cohort.InvalidArgumentError,
           lambda: cohort.Buffer.from_dlpack(torch.zeros(2, dtype=torch.bool)),
           "torch.Tensor cannot be exported through DLPack")
    raises(cohort.InvalidArgumentError,
           lambda: cohort.Buffer.from_dlpack(torch.zeros(2, requires_grad=True)), "detach")
    raises(cohort.InvalidArgumentError,
           lambda: cohort.Buffer.from_dlpack(np.zeros(2, dtype=np.uint16)), "16 bits")


def dtype_names():
    # Types name dtypes as numpy and torch read them: numpy's scalar types, and the builtins
    # (float is float64 and int is int64 there; the string "float" is torch's float32).
    for given, expected in ((np.float32, "float32"), (np.float16, "float16"),
                            (np.bool_, "bool"), (np.uint8, "uint8"), (np.int64, "int64"),
                            (float, "float64"), (int, "int64"), (bool, "bool"),
                            (np.dtype("int16"), "int16"), (torch.bfloat16, "bfloat16"),
                            ("float", "float32"), ("f64", "float64"),
                            (np.longlong, "int64"), (np.ulonglong, "uint64")):
        got = cohort.Buffer.allocate(2, given).dtype
        check(got == getattr(cohort.DType, expected), f"dtype {given!r} gave {got}")
    raises(cohort.InvalidArgumentError, lambda: cohort.Buffer.allocate(2, complex),
           "unknown dtype <class 'complex'>")
    raises(cohort.InvalidArgumentError, lambda: cohort.Buffer.allocate(2, np.complex64),
           "unknown dtype")


def main():
    exports()
    imports()
    dtype_names()


if __name__ == "__main__":
    run(main)
