"""Zero-copy DLPack exchange between numpy and cohort, through dlpack_numpy_shim.

numpy -> cohort: numpy's __dlpack__() capsule is consumed by cohort::from_dlpack, cohort writes
through the Buffer, numpy sees the writes, and numpy's deleter runs when the Buffer dies.
cohort -> numpy: cohort::to_dlpack's tensor is wrapped in a "dltensor" capsule and consumed by
np.from_dlpack; numpy reads and writes cohort's memory, and cohort's memory lives exactly as long
as numpy's array. numpy is required: a missing numpy is a failure, never a skip.

Usage: python3 dlpack_numpy_test.py <path to the shim shared module>
"""

import ctypes
import gc
import sys

import numpy as np

DLTENSOR = b"dltensor"  # capsule names are stored by pointer: keep them alive
USED_DLTENSOR = b"used_dltensor"

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what)


shim = ctypes.CDLL(sys.argv[1])
shim.shim_import_fill.restype = ctypes.c_int
shim.shim_import_fill.argtypes = [ctypes.c_void_p, ctypes.c_double, ctypes.c_char_p, ctypes.c_int,
                                  ctypes.POINTER(ctypes.c_ulonglong)]
shim.shim_export.restype = ctypes.c_void_p
shim.shim_export.argtypes = [ctypes.c_int]
shim.shim_export_alive.restype = ctypes.c_int
shim.shim_export_data.restype = ctypes.c_ulonglong
shim.shim_export_read.restype = ctypes.c_double
shim.shim_export_read.argtypes = [ctypes.c_int]
shim.shim_export_write.restype = None
shim.shim_export_write.argtypes = [ctypes.c_int, ctypes.c_double]

capsule_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
capsule_get_pointer.restype = ctypes.c_void_p
capsule_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
capsule_set_name = ctypes.pythonapi.PyCapsule_SetName
capsule_set_name.restype = ctypes.c_int
capsule_set_name.argtypes = [ctypes.py_object, ctypes.c_char_p]
capsule_new = ctypes.pythonapi.PyCapsule_New
capsule_new.restype = ctypes.py_object
capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
destructor = ctypes.cast(shim.shim_capsule_destructor, ctypes.c_void_p)


def import_into_cohort(array, start):
    """Hands array's DLPack tensor to cohort, which fills it; returns (report, data address)."""
    capsule = array.__dlpack__()
    pointer = capsule_get_pointer(capsule, DLTENSOR)
    capsule_set_name(capsule, USED_DLTENSOR)  # cohort owns the tensor now
    del capsule
    report = ctypes.create_string_buffer(512)
    data = ctypes.c_ulonglong(0)
    rc = shim.shim_import_fill(pointer, start, report, len(report), ctypes.byref(data))
    text = report.value.decode()
    check(rc == 0, "import failed: " + text)
    return text, data.value


# numpy -> cohort, contiguous, for each dtype numpy can export.
for dtype, name in [(np.float32, "float"), (np.float64, "double"), (np.float16, "half"),
                    (np.int8, "int8"), (np.uint8, "uint8"), (np.int16, "int16"),
                    (np.int32, "int32"), (np.int64, "int64"), (np.uint32, "uint32"),
                    (np.uint64, "uint64")]:
    array = np.zeros((3, 4), dtype=dtype)
    references = sys.getrefcount(array)
    report, address = import_into_cohort(array, 10.0)
    gc.collect()
    check(f"dtype={name} shape=[3,4]" in report, f"{name}: cohort saw {report}")
    check(address == array.ctypes.data, f"{name}: cohort wrote elsewhere (copy?)")
    check(np.array_equal(array, (10 + np.arange(12)).reshape(3, 4).astype(dtype)),
          f"{name}: numpy does not see cohort's writes: {array.ravel().tolist()}")
    check(sys.getrefcount(array) == references,
          f"{name}: numpy's deleter did not run ({sys.getrefcount(array)} != {references})")

# Bool: numpy versions that export it must map to cohort's bool.
try:
    flags = np.zeros(5, dtype=np.bool_)
    flags.__dlpack__()
    bool_exportable = True
except (BufferError, TypeError):
    bool_exportable = False
if bool_exportable:
    report, _ = import_into_cohort(flags, 1.0)
    check("dtype=bool" in report and flags.all(), f"bool: {report} {flags.tolist()}")

# numpy -> cohort, strided: every other column of a 4x6 matrix.
base = np.zeros((4, 6), dtype=np.int32)
view = base[:, ::2]
report, address = import_into_cohort(view, 100.0)
check("shape=[4,3] strides=[6,2] contiguous=0" in report, f"strided view: cohort saw {report}")
check(address == base.ctypes.data, "strided view: wrong address")
check(np.array_equal(view, (100 + np.arange(12)).reshape(4, 3)), f"strided view: {view.tolist()}")
check(not base[:, 1::2].any(), "strided view: cohort wrote between the strides")

# numpy -> cohort, size-1 dimension and an offset start (a slice in the middle of the array).
column = np.zeros((5, 1), dtype=np.float64)
report, _ = import_into_cohort(column[2:4], 7.0)
check("shape=[2,1]" in report and "contiguous=1" in report, f"size-1 dim: {report}")
check(column.ravel().tolist() == [0, 0, 7, 8, 0], f"offset slice: {column.ravel().tolist()}")


# cohort -> numpy.
class Exported:
    """The producer side of numpy's from_dlpack protocol around a ready-made capsule."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, stream=None, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU, device 0


tensor = shim.shim_export(9)
check(tensor is not None, "shim_export failed")
received = np.from_dlpack(Exported(capsule_new(tensor, DLTENSOR, destructor)))
gc.collect()
check(received.dtype == np.float64 and received.shape == (9,), f"numpy got {received.dtype} "
      f"{received.shape}")
check(received.tolist() == [0.5 * i for i in range(9)], f"numpy read {received.tolist()}")
check(received.ctypes.data == shim.shim_export_data(), "numpy copied cohort's buffer")
shim.shim_export_write(4, 42.0)  # numpy 1.24 marks from_dlpack arrays read-only; cohort writes
check(received[4] == 42.0, "numpy does not see cohort's write")
if received.flags.writeable:
    received[5] = -1.0
    check(shim.shim_export_read(5) == -1.0, "cohort does not see numpy's write")
check(shim.shim_export_alive() == 1, "cohort's memory died while numpy still uses it")
del received
gc.collect()
check(shim.shim_export_alive() == 0, "numpy's release did not free cohort's export")

# A capsule nobody consumes must still release the export through its destructor.
tensor = shim.shim_export(3)
unused = capsule_new(tensor, DLTENSOR, destructor)
check(shim.shim_export_alive() == 1, "export died early")
del unused
gc.collect()
check(shim.shim_export_alive() == 0, "an unconsumed capsule leaked cohort's export")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print(f"numpy {np.__version__}: DLPack exchange with cohort ok (bool exported: {bool_exportable})")
