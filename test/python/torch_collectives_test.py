"""torch tensors (float32, bfloat16, int64) through every collective and send/recv, blocking and
async, in place and out of place. Values are small integers, exact in bfloat16; every expected
value is written out from the inputs' definitions, never computed by cohort:

    element i of rank r:  v(r, i) = 10 r + i + 1
"""

from harness import check, equal, require, run, world

torch = require("torch")

DTYPES = [torch.float32, torch.bfloat16, torch.int64]
C = 5  # elements per rank: prime, not divisible by any world size tested


def v(rank, i):
    return 10 * rank + i + 1


def call(comm, name, asynchronous, *args, **kwargs):
    """comm.<name>(...) or comm.<name>_async(...).wait(); both return the output."""
    if asynchronous:
        work = getattr(comm, name + "_async")(*args, **kwargs)
        return work.wait(timeout=60)
    return getattr(comm, name)(*args, **kwargs)


class Case:
    def __init__(self, comm, dtype, asynchronous, in_place):
        self.comm, self.dtype = comm, dtype
        self.asynchronous, self.in_place = asynchronous, in_place
        self.n, self.r = comm.size, comm.rank

    def tensor(self, values):
        return torch.tensor(values, dtype=self.dtype)

    def run(self, name, *args, **kwargs):
        return call(self.comm, name, self.asynchronous, *args, **kwargs)

    def label(self, op):
        return (f"{op} {self.dtype} {'async' if self.asynchronous else 'blocking'} "
                f"{'in place' if self.in_place else 'out of place'}")

    # Ops whose output has the input's size: in place on `tensor`, or into out=.
    def same_size(self, name, values, expected, *args, **kwargs):
        x = self.tensor(values)
        label = self.label(f"{name}{args}{kwargs}")
        if self.in_place:
            result = self.run(name, x, *args, **kwargs)
            check(result is x, f"{label} returns the tensor")
            equal(x, expected, label)
        else:
            out = self.tensor([-1] * len(expected))
            result = self.run(name, x, *args, out=out, **kwargs)
            check(result is out, f"{label} returns out")
            equal(out, expected, label)
            equal(x, values, f"{label}: input unchanged")

    def allreduce(self):
        n, r = self.n, self.r
        self.same_size("allreduce", [v(r, i) for i in range(C)],
                       [10 * n * (n - 1) // 2 + n * (i + 1) for i in range(C)])
        self.same_size("allreduce", [v(r, i) for i in range(C)],
                       [v(n - 1, i) for i in range(C)], op="max")

    def broadcast(self):
        root = self.n - 1
        self.same_size("broadcast", [v(self.r, i) for i in range(C)],
                       [v(root, i) for i in range(C)], root=root)

    def reduce(self):
        n, r, root = self.n, self.r, 1 % self.n
        mine = [v(r, i) for i in range(C)]
        total = [10 * n * (n - 1) // 2 + n * (i + 1) for i in range(C)]
        if r == root:
            self.same_size("reduce", mine, total, root)
        else:  # the output of a non-root rank is never written
            x = self.tensor(mine)
            self.run("reduce", x, root)
            equal(x, mine, f"{self.label('reduce')} on a non-root rank")

    def allgather(self):
        n, r = self.n, self.r
        expected = [v(rank, i) for rank in range(n) for i in range(C)]
        out = self.tensor([-1] * (n * C))
        if self.in_place:
            out[r * C:(r + 1) * C] = self.tensor([v(r, i) for i in range(C)])
            self.run("allgather", None, out)
        else:
            self.run("allgather", self.tensor([v(r, i) for i in range(C)]), out)
        equal(out, expected, self.label("allgather"))

    def allgatherv(self):
        n, r = self.n, self.r
        counts = [rank + 1 for rank in range(n)]
        expected = [v(rank, i) for rank in range(n) for i in range(rank + 1)]
        out = self.tensor([-1] * sum(counts))
        if self.in_place:
            start = sum(counts[:r])
            out[start:start + r + 1] = self.tensor([v(r, i) for i in range(r + 1)])
            self.run("allgatherv", None, out, counts)
        else:
            self.run("allgatherv", self.tensor([v(r, i) for i in range(r + 1)]), out, counts)
        equal(out, expected, self.label("allgatherv"))

    def gather(self):
        n, r, root = self.n, self.r, self.n - 1
        mine = self.tensor([v(r, i) for i in range(C)])
        out = self.tensor([-1] * (n * C)) if r == root else None
        if self.in_place and r == root:
            out[r * C:(r + 1) * C] = mine
            mine = None
        result = self.run("gather", mine, out, root)
        if r == root:
            check(result is out, f"{self.label('gather')} returns out on the root")
            equal(out, [v(rank, i) for rank in range(n) for i in range(C)], self.label("gather"))

    def gatherv(self):
        n, r, root = self.n, self.r, 0
        counts = [n - rank for rank in range(n)]  # rank r sends n - r elements
        mine = self.tensor([v(r, i) for i in range(n - r)])
        out = self.tensor([-1] * sum(counts)) if r == root else None
        if self.in_place and r == root:
            out[:n] = mine  # the root is rank 0: its block starts at 0
            mine = None
        self.run("gatherv", mine, counts, out, root)
        if r == root:
            equal(out, [v(rank, i) for rank in range(n) for i in range(n - rank)],
                  self.label("gatherv"))

    def scatter(self):
        n, r, root = self.n, self.r, 1 % self.n
        source = self.tensor([j + 1 for j in range(n * C)]) if r == root else None
        if self.in_place and r == root:
            result = self.run("scatter", source, None, root)
            check(result is source, f"{self.label('scatter')} in place returns the tensor")
            mine = source[r * C:(r + 1) * C]
        else:
            mine = self.tensor([-1] * C)
            self.run("scatter", source, mine, root)
        equal(mine, [r * C + i + 1 for i in range(C)], self.label("scatter"))

    def scatterv(self):
        n, r, root = self.n, self.r, self.n - 1
        counts = [rank + 2 for rank in range(n)]
        source = self.tensor([j + 1 for j in range(sum(counts))]) if r == root else None
        start = sum(counts[:r])
        if self.in_place and r == root:
            self.run("scatterv", source, counts, None, root)
            mine = source[start:start + counts[r]]
        else:
            mine = self.tensor([-1] * counts[r])
            self.run("scatterv", source, counts, mine, root)
        equal(mine, [start + i + 1 for i in range(counts[r])], self.label("scatterv"))

    def reduce_scatter(self):
        n, r = self.n, self.r
        x = self.tensor([v(r, j) for j in range(n * C)])
        expected = [10 * n * (n - 1) // 2 + n * (j + 1) for j in range(r * C, (r + 1) * C)]
        if self.in_place:
            self.run("reduce_scatter", x)
            equal(x[r * C:(r + 1) * C], expected, self.label("reduce_scatter"))
        else:
            out = self.tensor([-1] * C)
            self.run("reduce_scatter", x, out=out)
            equal(out, expected, self.label("reduce_scatter"))

    def alltoall(self):
        n, r = self.n, self.r
        # Block b of rank s goes to rank b; element i of it is 10 s + b C + i + 1.
        self.same_size("alltoall", [v(r, j) for j in range(n * C)],
                       [10 * s + r * C + i + 1 for s in range(n) for i in range(C)])

    def alltoallv(self):
        n, r = self.n, self.r
        # Rank s sends d + 1 elements to rank d, element k being 10 s + d + k + 1.
        send_counts = [d + 1 for d in range(n)]
        recv_counts = [r + 1] * n
        x = self.tensor([10 * r + d + k + 1 for d in range(n) for k in range(d + 1)])
        expected = [10 * s + r + k + 1 for s in range(n) for k in range(r + 1)]
        if self.in_place and sum(send_counts) == sum(recv_counts):
            self.run("alltoallv", x, send_counts, recv_counts)
            equal(x, expected, self.label("alltoallv"))
        else:
            out = self.tensor([-1] * sum(recv_counts))
            self.run("alltoallv", x, send_counts, recv_counts, out=out)
            equal(out, expected, self.label("alltoallv"))

    def send_recv(self):
        n, r = self.n, self.r
        right, left = (r + 1) % n, (r - 1) % n
        received = self.tensor([-1] * C)
        # The receive is posted before the blocking send, so an odd ring cannot deadlock.
        pending = self.comm.recv_async(received, left, tag=4)
        self.run("send", self.tensor([v(r, i) for i in range(C)]), right, tag=4)
        check(pending.wait(timeout=60) is received, "recv_async's wait returns the tensor")
        equal(received, [v(left, i) for i in range(C)], self.label("send/recv ring"))

    def barrier(self):
        check(self.run("barrier") is None, "barrier returns None")


def main():
    comm = world()
    check(comm.size >= 2, "run this test with 2 or more ranks")
    ops = ["allreduce", "broadcast", "reduce", "allgather", "allgatherv", "gather", "gatherv",
           "scatter", "scatterv", "reduce_scatter", "alltoall", "alltoallv", "send_recv",
           "barrier"]
    for dtype in DTYPES:
        for asynchronous in (False, True):
            for in_place in (True, False):
                case = Case(comm, dtype, asynchronous, in_place)
                for op in ops:
                    getattr(case, op)()

    # A split communicator runs the same ops: evens and odds, reversed by key.
    sub = comm.split(comm.rank % 2, key=-comm.rank)
    Case(sub, torch.float32, False, True).allreduce()
    Case(sub, torch.int64, True, False).alltoall()
    check(comm.split(None) is None, "split(None) joins no group")
    comm.barrier()


if __name__ == "__main__":
    run(main)
