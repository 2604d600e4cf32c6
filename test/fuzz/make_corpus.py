#!/usr/bin/env python3
"""Writes the seed corpus of every harness in test/fuzz: corpus/<harness>/<seed name>.

Each seed is a small valid (or deliberately almost valid) input in the layout its harness's top
comment describes, so fuzzing starts next to the interesting paths instead of having to discover
the frame magic or a launcher's variable names. Run it after changing a harness's input layout:

    python3 test/fuzz/make_corpus.py

It replaces the corpus directories it writes; the seeds are checked in.
"""

import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

# --- the TcpStore wire format (lib/bootstrap/store_protocol.hpp) -------------------------------
MAGIC = 0x54534843
HELLO, SET, GET, ADD, COMPARE_SET, WAIT, CHECK, ERASE, NUM_KEYS = range(1, 10)
OK, VALUE, INTEGER, MISSING, FAILURE = range(0x80, 0x85)
TOKEN = b"fuzz-token"  # store_server_fuzzer.cpp's server token


def field(data):
    if isinstance(data, str):
        data = data.encode()
    return struct.pack("<Q", len(data)) + data


def integer(value):
    return field(struct.pack("<q", value))


def frame(kind, *fields):
    body = b"".join(fields)
    return struct.pack("<IBBHQ", MAGIC, 1, kind, 0, len(body)) + body


def store_frame_seeds():
    limit = bytes([10])  # store_frame_fuzzer: 1 << 10 bytes per field
    return {
        "hello": limit + frame(HELLO, field(TOKEN)),
        "set": limit + frame(SET, field("key"), field("value")),
        "get": limit + frame(GET, integer(5000), field("key")),
        "add": limit + frame(ADD, field("counter"), integer(-3)),
        "compare_set": limit + frame(COMPARE_SET, field("k"), field(""), field("new")),
        "wait": limit + frame(WAIT, integer(100), field("a"), field("b"), field("c")),
        "check": limit + frame(CHECK, field("a"), field("b")),
        "erase": limit + frame(ERASE, field("key")),
        "num_keys": limit + frame(NUM_KEYS),
        "ok": limit + frame(OK),
        "value": limit + frame(VALUE, field(bytes(range(16)))),
        "integer": limit + frame(INTEGER, integer(42)),
        "missing": limit + frame(MISSING, field("a"), field("b")),
        "failure": limit + frame(FAILURE, integer(3), field("refused")),
        "field_over_limit": bytes([2]) + frame(SET, field("k"), field("x" * 5)),
        "truncated_body": limit + frame(SET, field("key"), field("value"))[:-3],
        "bad_magic": limit + b"XXXX" + frame(OK)[4:],
    }


def record(connection, data, half_close=False):
    """One store_server_fuzzer record: selector, u16 length, bytes."""
    selector = connection | (0x40 if half_close else 0)
    return struct.pack("<BH", selector, len(data)) + data


def store_server_seeds():
    hello = frame(HELLO, field(TOKEN))
    every_request = b"".join([
        hello,
        frame(SET, field("k"), field("v")),
        frame(GET, integer(1000), field("k")),
        frame(ADD, field("n"), integer(5)),
        frame(ADD, field("n"), integer(-2)),
        frame(COMPARE_SET, field("k"), field("v"), field("w")),
        frame(COMPARE_SET, field("fresh"), field(""), field("x")),
        frame(WAIT, integer(1000), field("k"), field("n")),
        frame(CHECK, field("k"), field("absent")),
        frame(ERASE, field("k")),
        frame(NUM_KEYS),
    ])
    return {
        "every_request": record(0, every_request),
        # A parked get woken by another client's set; then a wait that expires.
        "get_woken_by_set": record(0, hello + frame(GET, integer(60000), field("late")))
        + record(1, hello + frame(SET, field("late"), field("here")))
        + record(0, frame(WAIT, integer(5), field("never"))),
        # Requests pipelined behind a parked get, resumed once it is answered.
        "pipelined_behind_park": record(0, hello + frame(GET, integer(60000), field("x"))
                                        + frame(SET, field("y"), field("1"))
                                        + frame(GET, integer(0), field("y")))
        + record(1, hello + frame(SET, field("x"), field("2"))),
        # Two clients waiting on overlapping keys; a third sets them one by one.
        "waiters_reindexed": record(0, hello + frame(WAIT, integer(60000), field("a"), field("b")))
        + record(1, hello + frame(WAIT, integer(60000), field("b"), field("a")))
        + record(2, hello + frame(SET, field("a"), field("1")))
        + record(2, frame(SET, field("b"), field("2"))),
        "wrong_token": record(0, frame(HELLO, field("nope")) + frame(NUM_KEYS)),
        "request_before_hello": record(0, frame(SET, field("k"), field("v"))),
        "oversized_claim": record(0, hello + struct.pack("<IBBHQ", MAGIC, 1, SET, 0, 1 << 40)),
        "split_frame": record(0, hello + frame(SET, field("key"), field("value"))[:9])
        + record(0, frame(SET, field("key"), field("value"))[9:]),
        "half_close_mid_frame": record(0, hello + frame(SET, field("k"), field("v"))[:20], True),
        "add_to_text": record(0, hello + frame(SET, field("t"), field("text"))
                              + frame(ADD, field("t"), integer(1))),
        "extra_field": record(0, hello + frame(NUM_KEYS, field("junk"))),
        "reply_type_from_client": record(0, hello + frame(OK)),
    }


# --- DLPack (dlpack_import_fuzzer.cpp's layout) -------------------------------------------------
VERSIONED, NULL_DELETER, NULL_DATA, NULL_SHAPE, NULL_STRIDES = 1, 2, 4, 8, 16


def compact(value):
    if 0 <= value < 0x80:
        return bytes([value])
    return b"\x80" + struct.pack("<q", value)


def tensor(mode, code, bits, shape, strides=None, lanes=1, device=1, device_id=0,
           byte_offset=0, major=1, minor=1, flags=0):
    out = struct.pack("<BBBHIIb", mode, code, bits, lanes, device, device_id, len(shape))
    out += compact(byte_offset)
    out += b"".join(compact(e) for e in shape)
    if strides is not None:
        out += b"".join(compact(s) for s in strides)
    if mode & VERSIONED:
        out += struct.pack("<IIQ", major, minor, flags)
    return out


def dlpack_seeds():
    return {
        "legacy_f32_2x3": tensor(0, 2, 32, [2, 3], [3, 1]),
        "legacy_i64_null_strides": tensor(NULL_STRIDES, 0, 64, [5]),
        "legacy_transposed": tensor(0, 2, 64, [3, 2], [1, 3], byte_offset=8),
        "versioned_read_only": tensor(VERSIONED, 2, 32, [4], [1], flags=1),
        "versioned_bool": tensor(VERSIONED | NULL_STRIDES, 6, 8, [7]),
        "versioned_fp8": tensor(VERSIONED, 10, 8, [2, 2], [2, 1], minor=1),
        "versioned_major_2": tensor(VERSIONED, 2, 32, [1], [1], major=2),
        "empty_null_data": tensor(NULL_DATA, 2, 16, [0, 4], [4, 1]),
        "empty_huge_extents": tensor(NULL_DATA | NULL_STRIDES, 2, 32, [0, 1 << 40, 1 << 40]),
        "scalar": tensor(0, 4, 16, []),
        "cuda_device": tensor(VERSIONED, 2, 32, [8], [1], device=2, device_id=1),
        "four_lanes": tensor(0, 2, 32, [4], [1], lanes=4),
        "overflowing_shape": tensor(0, 2, 64, [1 << 40, 1 << 30], [1, 1]),
        "null_shape": tensor(NULL_SHAPE, 2, 32, [3], [1]),
        "null_deleter": tensor(NULL_DELETER | VERSIONED, 1, 8, [16], [1]),
    }


# --- tunables (tunables_fuzzer.cpp: index into tunable_list(), then the value) -------------------
TUNABLE_INDEX = {  # lib/core/tunables.cpp's table order
    "COHORT_TIMEOUT": 0, "COHORT_ALGO": 1, "COHORT_DEBUG": 2, "COHORT_LOG_LEVEL": 3,
    "COHORT_SPIN_US": 4, "COHORT_SHARED_MEMORY": 5, "COHORT_UCX_ERR_HANDLING": 6,
    "COHORT_STORE_TIMEOUT": 7, "COHORT_RENDEZVOUS_DIR": 8, "COHORT_TOKEN": 9,
    "COHORT_SINGLE_COPY": 12, "COHORT_MEASURED_CHOICE": 13, "COHORT_KERNEL_ISA": 14,
}


def tunables_seeds():
    values = [
        ("timeout", "COHORT_TIMEOUT", "30"), ("timeout_fraction", "COHORT_TIMEOUT", "0.25"),
        ("timeout_too_long", "COHORT_TIMEOUT", "1e9"), ("algo", "COHORT_ALGO", "allreduce:ring"),
        ("debug", "COHORT_DEBUG", "DETAIL"), ("log_level", "COHORT_LOG_LEVEL", "info"),
        ("spin", "COHORT_SPIN_US", "250"), ("spin_negative", "COHORT_SPIN_US", "-1"),
        ("shared_memory", "COHORT_SHARED_MEMORY", "off"),
        ("single_copy", "COHORT_SINGLE_COPY", "off"),
        ("measured_choice", "COHORT_MEASURED_CHOICE", "off"),
        ("measured_choice_bad", "COHORT_MEASURED_CHOICE", "sometimes"),
        ("kernel_isa", "COHORT_KERNEL_ISA", "avx2"),
        ("kernel_isa_bad", "COHORT_KERNEL_ISA", "sse4"),
        ("ucx_err", "COHORT_UCX_ERR_HANDLING", "peer"),
        ("store_timeout", "COHORT_STORE_TIMEOUT", "2.5"),
        ("store_timeout_tiny", "COHORT_STORE_TIMEOUT", "0.001"),
        ("store_timeout_below_half_ms", "COHORT_STORE_TIMEOUT", "0.0001"),
        ("rendezvous_dir", "COHORT_RENDEZVOUS_DIR", "/tmp/cohort"),
        ("token", "COHORT_TOKEN", "s3cret-token"),
    ]
    return {name: bytes([TUNABLE_INDEX[var]]) + text.encode() for name, var, text in values}


def algorithm_overrides_seeds():
    specs = {
        "one": "allreduce:ring",
        "two": "allreduce:rabenseifner,broadcast:tree",
        "blanks": " reduce_scatter : recursive_halving ,\tbarrier:dissemination",
        "many": "alltoall:bruck,allgather:recursive_doubling,gather:tree,scatter:tree,"
                "reduce:reduce_scatter_gather",
        "auto": "allreduce:auto",
        "shared_memory": "allreduce:shared_memory,barrier:shared_memory",
        "alias": "reducescatter:ring",
        "v_form": "allgatherv:ring",
        "twice": "allreduce:ring,allreduce:tree",
        "not_implemented": "broadcast:bruck",
        "empty_entry": "allreduce:ring,,broadcast:tree",
    }
    return {name: spec.encode() for name, spec in specs.items()}


# --- environment (environment_fuzzer.cpp: config mask and values, then variable records) --------
ENV_VARIABLES = [  # environment_fuzzer.cpp's kVariables, in order
    "COHORT_RANK", "COHORT_WORLD_SIZE", "COHORT_LOCAL_RANK", "COHORT_LOCAL_WORLD_SIZE",
    "COHORT_NODE_RANK", "COHORT_NNODES", "COHORT_JOB_ID", "RANK", "WORLD_SIZE", "LOCAL_RANK",
    "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "TORCHELASTIC_RUN_ID",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid",
    "PMIX_NAMESPACE", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "PMI_JOBID",
    "PMI_KVSNAME", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID",
    "SLURM_NNODES", "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_JOB_ID",
    "SLURM_JOBID", "SLURM_STEP_ID", "SLURM_STEPID", "COHORT_STORE_ADDR", "MASTER_ADDR",
    "COHORT_STORE_PORT", "MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE", "COHORT_TOKEN",
    "COHORT_HOST_STORE", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NUM_NODES",
]


def environment(variables, config=b"\x00"):
    out = config
    for name, value in variables.items():
        out += bytes([ENV_VARIABLES.index(name), len(value)]) + value.encode()
    return out


def environment_seeds():
    return {
        "none": b"\x00",
        "cohort_run": environment({
            "COHORT_RANK": "3", "COHORT_WORLD_SIZE": "4", "COHORT_LOCAL_RANK": "1",
            "COHORT_LOCAL_WORLD_SIZE": "2", "COHORT_NODE_RANK": "1", "COHORT_NNODES": "2",
            "COHORT_STORE_ADDR": "127.0.0.1", "COHORT_STORE_PORT": "29400",
            "COHORT_JOB_ID": "job", "COHORT_HOST_STORE": "0"}),
        "torchrun_agent_store": environment({
            "RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4",
            "GROUP_RANK": "1", "GROUP_WORLD_SIZE": "2", "MASTER_ADDR": "node0",
            "MASTER_PORT": "29500", "TORCHELASTIC_USE_AGENT_STORE": "True",
            "TORCHELASTIC_RUN_ID": "run"}),
        "openmpi": environment({
            "OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "6",
            "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
            "OMPI_MCA_ess_base_jobid": "1234"}),
        "pmi": environment({
            "PMI_RANK": "1", "PMI_SIZE": "3", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "3",
            "PMI_KVSNAME": "kvs_1"}),
        "slurm_tasks_per_node": environment({
            "SLURM_PROCID": "5", "SLURM_NTASKS": "6", "SLURM_NODEID": "2",
            "SLURM_NNODES": "3", "SLURM_TASKS_PER_NODE": "2(x2),2", "SLURM_JOB_ID": "77",
            "SLURM_STEP_ID": "0"}),
        "slurm_uneven": environment({
            "SLURM_PROCID": "4", "SLURM_NTASKS": "5", "SLURM_LOCALID": "1", "SLURM_NODEID": "1",
            "SLURM_STEP_TASKS_PER_NODE": "3,2", "SLURM_STEPID": "1",
            "SLURM_STEP_NUM_TASKS": "5", "SLURM_STEP_NUM_NODES": "2"}),
        "config_rank_and_size": struct.pack("<BiiH", 0x01 | 0x02 | 0x40, 1, 2, 4000),
        "config_overrides_launcher": struct.pack("<Bi", 0x04, 0)
        + environment({"RANK": "1", "WORLD_SIZE": "2"}, config=b""),
        "rank_without_size": environment({"COHORT_RANK": "1"}),
        "rank_not_below_size": environment({"RANK": "4", "WORLD_SIZE": "4"}),
    }


def write(harness, seeds):
    directory = os.path.join(HERE, "corpus", harness)
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    for name, data in sorted(seeds.items()):
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)


def main():
    write("store_frame", store_frame_seeds())
    write("store_server", store_server_seeds())
    write("dlpack_import", dlpack_seeds())
    write("tunables", tunables_seeds())
    write("algorithm_overrides", algorithm_overrides_seeds())
    write("environment", environment_seeds())


if __name__ == "__main__":
    main()
