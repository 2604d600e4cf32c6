"""Blocking ops and Work.wait release the GIL: rank 0's main thread blocks in a receive that rank
1 answers only after ROUNDS ping-pongs with another Python thread of rank 0, each needing that
thread to run Python code. Were the GIL held by the blocked main thread, the helper would stop at
its first blocking call (which hands the GIL to the waiting main thread) and the receive would
time out. Run with 2 or more ranks; ranks beyond 1 only take part in the barriers. No sleeps:
the order is forced by the messages themselves.
"""

import threading

from harness import check, run, world

import cohort

DEADLINE = 30.0  # seconds; only reached if the GIL is held (the test then fails, not hangs)
ROUNDS = 200     # far longer than CPython's 5 ms switch interval


def ping_pong(side, rank):
    """ROUNDS round trips between rank 0 (the helper thread) and rank 1, Python between each."""
    message = bytearray(4)
    for round_number in range(ROUNDS):
        if rank == 0:
            message[:] = round_number.to_bytes(4, "little")
            side.send(message, peer=1, timeout=DEADLINE)
            side.recv(message, peer=1, timeout=DEADLINE)
            check(int.from_bytes(message, "little") == round_number + 1, "echo")
        else:
            side.recv(message, peer=0, timeout=DEADLINE)
            message[:] = (int.from_bytes(message, "little") + 1).to_bytes(4, "little")
            side.send(message, peer=0, timeout=DEADLINE)


def blocked_main_thread(comm, side, wait_on_work):
    """Rank 0's main thread waits for rank 1's answer, which follows the helper's ping-pongs."""
    if comm.rank == 0:
        failures = []

        def helper_main():
            try:
                ping_pong(side, 0)
            except Exception as error:  # pylint: disable=broad-except  (reported below)
                failures.append(error)
        helper = threading.Thread(target=helper_main)
        answer = bytearray(4)
        helper.start()
        if wait_on_work:
            comm.recv_async(answer, peer=1, tag=1).wait(timeout=DEADLINE)
        else:
            comm.recv(answer, peer=1, tag=1, timeout=DEADLINE)
        helper.join()
        check(not failures, f"helper thread: {failures}")
        check(bytes(answer) == b"pong", f"answer {bytes(answer)!r}")
    elif comm.rank == 1:
        ping_pong(side, 1)
        comm.send(bytearray(b"pong"), peer=0, tag=1, timeout=DEADLINE)


def main():
    comm = world()
    check(comm.size >= 2, "run this test with 2 or more ranks")
    side = comm.dup()  # the helper thread's own communicator
    blocked_main_thread(comm, side, wait_on_work=False)
    comm.barrier()
    blocked_main_thread(comm, side, wait_on_work=True)
    comm.barrier()
    check(isinstance(side, cohort.Communicator), "dup returns a Communicator")


if __name__ == "__main__":
    run(main)
