"""The stream= keyword, Work.make_stream_wait and CUDA tensors through DLPack, in a world of one
without a GPU: every collective and send/recv takes stream= (an int, or a torch/CuPy stream);
host ops accept and ignore it, bad values are refused before anything moves, and a stream
reaches the op (a barrier given one runs on NCCL, refused here). A DLPack producer on a CUDA
device gets the op's stream through __dlpack__(stream=...) (CUDA's legacy default stream 0 is
spelled 1 there), and its tensor is routed to the device path (refused here). The CUDA producer
is numpy memory whose capsule is relabelled kDLCUDA, so that part runs only where cohort sees no
CUDA device (nothing then ever reads the memory as device memory).
"""

import ctypes

from harness import check, raises, require, run, world

np = require("numpy")
import cohort  # noqa: E402

KDL_CUDA = 2

PyCapsule_GetPointer = ctypes.pythonapi.PyCapsule_GetPointer
PyCapsule_GetPointer.restype = ctypes.c_void_p
PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


class CudaLabelled:
    """A DLPack producer claiming cuda:0 for numpy memory, recording the stream it is asked for."""

    def __init__(self, count):
        self.array = np.zeros(count, dtype=np.float32)
        self.streams = []
        self.device_queries = 0

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.streams.append(stream)
        capsule = self.array.__dlpack__()  # numpy 1.x: a legacy "dltensor" capsule
        managed = PyCapsule_GetPointer(capsule, b"dltensor")
        # DLManagedTensor starts with its DLTensor: data (a pointer), then DLDevice's type.
        ctypes.c_int32.from_address(managed + ctypes.sizeof(ctypes.c_void_p)).value = KDL_CUDA
        return capsule

    def __dlpack_device__(self):
        self.device_queries += 1
        return (KDL_CUDA, 0)


class TorchLikeStream:
    """What torch.cuda.Stream exposes: its cudaStream_t as an int."""

    def __init__(self, handle):
        self.cuda_stream = handle


def every_op_accepts_stream_on_host_tensors(comm):
    a = lambda: np.arange(4, dtype=np.float32)  # noqa: E731
    for stream in (None, 0, 7, TorchLikeStream(9), np.int64(5)):
        out = comm.allreduce(a(), stream=stream)
        check(out.tolist() == [0, 1, 2, 3], f"allreduce with stream={stream!r}: {out}")
        comm.allreduce_async(a(), stream=stream).wait()
        comm.broadcast(a(), 0, stream=stream)
        comm.broadcast_async(a(), 0, stream=stream).wait()
        comm.reduce(a(), 0, stream=stream)
        comm.reduce_async(a(), 0, stream=stream).wait()
        comm.allgather(a(), np.zeros(4, np.float32), stream=stream)
        comm.allgather_async(a(), np.zeros(4, np.float32), stream=stream).wait()
        comm.allgatherv(a(), np.zeros(4, np.float32), [4], stream=stream)
        comm.allgatherv_async(a(), np.zeros(4, np.float32), [4], stream=stream).wait()
        comm.gather(a(), np.zeros(4, np.float32), 0, stream=stream)
        comm.gather_async(a(), np.zeros(4, np.float32), 0, stream=stream).wait()
        comm.gatherv(a(), [4], np.zeros(4, np.float32), 0, stream=stream)
        comm.gatherv_async(a(), [4], np.zeros(4, np.float32), 0, stream=stream).wait()
        comm.scatter(a(), np.zeros(4, np.float32), 0, stream=stream)
        comm.scatter_async(a(), np.zeros(4, np.float32), 0, stream=stream).wait()
        comm.scatterv(a(), [4], np.zeros(4, np.float32), 0, stream=stream)
        comm.scatterv_async(a(), [4], np.zeros(4, np.float32), 0, stream=stream).wait()
        comm.reduce_scatter(a(), out=np.zeros(4, np.float32), stream=stream)
        comm.reduce_scatter_async(a(), out=np.zeros(4, np.float32), stream=stream).wait()
        comm.alltoall(a(), stream=stream)
        comm.alltoall_async(a(), stream=stream).wait()
        comm.alltoallv(a(), [4], [4], stream=stream)
        comm.alltoallv_async(a(), [4], [4], stream=stream).wait()
    # send/recv need a peer; a bad stream is refused before the peer is looked at, which shows
    # the keyword is there and parsed first.
    for name in ("send", "send_async", "recv", "recv_async"):
        raises(cohort.InvalidArgumentError,
               lambda: getattr(comm, name)(a(), 0, stream="s"), f"{name}: stream must be")


def bad_streams_are_refused(comm):
    x = np.zeros(2, np.float32)
    for bad, fragment in ((-1, "negative or too large"), (2**64, "negative or too large"),
                          (1.5, "not float"), (True, "not bool"), ("0", "not str"),
                          (TorchLikeStream("x"), "stream must be")):
        raises(cohort.InvalidArgumentError, lambda: comm.allreduce(x, stream=bad),
               "allreduce: ", fragment)
    raises(cohort.InvalidArgumentError, lambda: comm.barrier_async(stream=[1]),
           "barrier_async: stream must be")


def no_cuda_device():
    try:
        cohort.Buffer.allocate(1, "float32", device="cuda:0")
    except cohort.UnsupportedError:
        return True
    return False


def a_stream_reaches_the_op(comm):
    comm.barrier()  # no stream: the host path
    # With a stream, a barrier is a one-element allreduce on NCCL: refused without a device.
    raises(cohort.UnsupportedError, lambda: comm.barrier(stream=0), "barrier", "CUDA")
    raises(cohort.UnsupportedError, lambda: comm.barrier_async(stream=TorchLikeStream(3)),
           "CUDA")


def make_stream_wait_on_host_work(comm):
    x = np.ones(3, np.float32)
    work = comm.allreduce_async(x)
    work.make_stream_wait(0)  # a host op: waits like wait()
    check(work.test(), "make_stream_wait returned before the host op finished")
    comm.allreduce_async(x).make_stream_wait(TorchLikeStream(12))
    raises(cohort.InvalidArgumentError, lambda: work.make_stream_wait(None),
           "Work.make_stream_wait: stream must not be None")
    raises(cohort.InvalidArgumentError, lambda: work.make_stream_wait("s"),
           "Work.make_stream_wait: stream must be")


def cuda_tensors_get_the_stream_and_take_the_device_path(comm):
    tensor = CudaLabelled(4)
    raises(cohort.UnsupportedError, lambda: comm.allreduce(tensor, stream=123), "CUDA")
    check(tensor.streams == [123], f"__dlpack__ got streams {tensor.streams}, expected [123]")
    check(tensor.device_queries == 1, "the producer's device was not asked for")

    tensor = CudaLabelled(4)
    raises(cohort.UnsupportedError, lambda: comm.allreduce_async(tensor, stream=0), "CUDA")
    check(tensor.streams == [1], f"stream 0 reached __dlpack__ as {tensor.streams}, not [1]")

    tensor = CudaLabelled(4)
    raises(cohort.UnsupportedError, lambda: comm.broadcast(tensor, 0, stream=TorchLikeStream(77)),
           "CUDA")
    check(tensor.streams == [77], f"a torch-like stream reached __dlpack__ as {tensor.streams}")

    # Without stream= the legacy default stream (1) is passed, which an op without a stream is
    # ordered after: passing nothing asks torch for no synchronisation at all.
    tensor = CudaLabelled(4)
    raises(cohort.UnsupportedError, lambda: comm.allreduce(tensor), "CUDA")
    check(tensor.streams == [None, 1],
          f"no stream= reached __dlpack__ as {tensor.streams}, not [None, 1]")
    check(tensor.device_queries == 0, f"the device was asked {tensor.device_queries} times")

    # The imported buffer says where it lives; it was asked for with the legacy default stream.
    labelled = CudaLabelled(2)
    buffer = cohort.Buffer.from_dlpack(labelled)
    check(buffer.device == "cuda:0", f"a kDLCUDA capsule was imported as {buffer.device}")
    check(labelled.streams == [None, 1],
          f"Buffer.from_dlpack asked with {labelled.streams}, not [None, 1]")


def allocate_on_devices_is_refused_here():
    raises(cohort.UnsupportedError, lambda: cohort.Buffer.allocate(4, device="cuda:0"), "CUDA")
    raises(cohort.UnsupportedError, lambda: cohort.Buffer.allocate(4, device="cuda_host"), "CUDA")
    raises(cohort.InvalidArgumentError, lambda: cohort.Buffer.allocate(4, device="tpu"),
           "unknown device 'tpu'")
    raises(cohort.InvalidArgumentError, lambda: cohort.Buffer.allocate(4, device="cuda:x"),
           "no valid index")
    host = cohort.Buffer.allocate((2, 2), "int32", device="cpu")
    check(host.device == "cpu" and host.shape == (2, 2), f"{host}")


def main():
    comm = world()
    check(comm.size == 1, "run this test alone (a world of one)")
    every_op_accepts_stream_on_host_tensors(comm)
    bad_streams_are_refused(comm)
    make_stream_wait_on_host_work(comm)
    if no_cuda_device():
        a_stream_reaches_the_op(comm)
        cuda_tensors_get_the_stream_and_take_the_device_path(comm)
        allocate_on_devices_is_refused_here()
    else:
        print("a CUDA device is visible: the no-device refusals are not checked")


run(main)
