"""The Python package on NumPy arrays, under mpirun (no GPU, no PyTorch):

  1. the scenario of scenario.h gives, byte for byte, what the C++ API gave (REFERENCE.<rank>, written by
     gradagg_python_reference in the same layout);
  2. exact float32 sums at 32 bits, the header summed, async calls equal to blocking ones;
  3. errors raise UsageError with gradagg's message on every rank; empty, zero-size and 2-D arrays work, strided
     ones and closed aggregators are refused;
  4. with mpi4py, an Aggregator on a sub-communicator sums over that communicator only;
  5. reduce_scatter() leaves in this rank's shard what aggregate() gives there (exact at 32 bits, bitwise at 1) and
     its input elsewhere;
  6. a ShardAggregator sums each rank's own shard (of its local index's size; local index 1's empty) over the ranks of
     its local index exactly at 32 bits, refuses the async call, and a mismatch on one local index raises
     UsageError on every rank.

  mpirun -np N python3 test_numpy.py REFERENCE     (GRADAGG_LIBRARY or the source tree's build/ locates the library)
Prints "python_numpy_test: PASS" on rank 0 when every rank passed; exits non-zero otherwise.
"""
import sys
import traceback

import numpy

import gradagg

LENGTHS = [3, 5000, 1, 700]
BITS = [1, 8, 32]
STEPS = 3


def scenario_value(length, t, rank, step):
    i = numpy.arange(length, dtype=numpy.uint64)
    hashed = (i * numpy.uint64(2654435761) + numpy.uint64(rank * 40503 + step * 977 + t * 131)) % numpy.uint64(65536)
    return (hashed.astype(numpy.float64) / 4096.0 - 8.0).astype(numpy.float32)


def check_reference(reference, rank):
    expected = numpy.fromfile(f"{reference}.{rank}", dtype=numpy.float32)
    results = []
    for bits in BITS:
        with gradagg.Aggregator(bits=bits) as agg:
            for step in range(STEPS):
                tensors = [scenario_value(n, t, rank, step) for t, n in enumerate(LENGTHS)]
                agg.aggregate(tensors)
                results.extend(tensors)
    got = numpy.concatenate(results)
    assert got.shape == expected.shape, f"{got.shape} elements, the C++ API wrote {expected.shape}"
    differ = numpy.flatnonzero(got.view(numpy.uint32) != expected.view(numpy.uint32))
    assert differ.size == 0, f"{differ.size} elements differ from the C++ API's, first at {differ[0]}"


def check_exact_sums_and_header(rank, size):
    with gradagg.Aggregator(bits=32) as agg:
        weights = numpy.full(1000, rank + 1, dtype=numpy.float32) + numpy.arange(1000, dtype=numpy.float32) % 7
        bias = numpy.array([rank * 1000.0, 1.5], dtype=numpy.float32)
        header = gradagg.Header(num_samples=rank + 1, criterion=0.5, eval_errors=[(rank, 2)])
        agg.aggregate([weights, bias], header=header)
        ranks_sum = size * (size + 1) // 2
        assert numpy.array_equal(weights, ranks_sum + size * (numpy.arange(1000, dtype=numpy.float32) % 7)), weights[:5]
        assert bias.tolist() == [1000.0 * size * (size - 1) / 2, 1.5 * size], bias
        assert header.num_samples == ranks_sum and header.criterion == 0.5 * size, header
        assert header.eval_errors == [(size * (size - 1) / 2, 2 * size)], header
        assert agg.stats["total"] > 0.0

    with gradagg.Aggregator(bits=1) as blocking, gradagg.Aggregator(bits=1) as background:
        for step in range(2):
            a = scenario_value(3000, 9, rank, step)
            b = a.copy()
            header = gradagg.Header(num_samples=1)
            pending = background.aggregate_async([b], header=header)
            blocking.aggregate(a)
            pending.wait()
            assert a.view(numpy.uint32).tolist() == b.view(numpy.uint32).tolist(), f"async differs at step {step}"
            assert header.num_samples == size and pending.done()


def expect_usage_error(call, needle):
    try:
        call()
    except gradagg.UsageError as error:
        assert needle in str(error), f"message {error!s} lacks {needle!r}"
        return
    raise AssertionError(f"no UsageError (expected one naming {needle!r})")


def check_errors(rank, size):
    expect_usage_error(lambda: gradagg.Aggregator(bits=3), "bits")
    try:
        gradagg.Aggregator(bit=1)
        raise AssertionError("a misspelt option was accepted")
    except TypeError as error:
        assert "bit" in str(error)
    with gradagg.Aggregator(bits=1) as agg:
        expect_usage_error(lambda: agg.aggregate(numpy.zeros(4, dtype=numpy.float64)), "float32")
        expect_usage_error(lambda: agg.aggregate([[1.0, 2.0]]), "NumPy")
        if size > 1:  # sizes that differ between ranks: reported on every rank together
            expect_usage_error(lambda: agg.aggregate(numpy.ones(10 + rank, dtype=numpy.float32)), "rank")
        values = numpy.ones(10, dtype=numpy.float32)
        agg.aggregate(values)  # still usable after the errors
        assert numpy.all(values == size)


def check_shapes(size):
    with gradagg.Aggregator(bits=1) as agg:
        agg.aggregate([])  # nothing to sum: fine
        agg.aggregate(numpy.zeros(0, dtype=numpy.float32))
        matrix = numpy.ones((3, 5), dtype=numpy.float32)  # any contiguous shape is a flat tensor
        agg.aggregate(matrix)
        assert numpy.all(matrix == size), matrix
        column = numpy.ones((4, 4), dtype=numpy.float32)[:, 1]
        expect_usage_error(lambda: agg.aggregate(column), "contiguous")
        pending = agg.aggregate_async([numpy.ones(7, dtype=numpy.float32)])
        pending.wait()
        pending.wait()  # a second wait returns at once
    expect_usage_error(lambda: agg.aggregate(matrix), "closed")


def check_sub_communicator(rank, size):
    try:
        from mpi4py import MPI
    except ImportError:
        return "mpi4py absent: sub-communicator check skipped"
    half = MPI.COMM_WORLD.Split(rank % 2, rank)
    with gradagg.Aggregator(comm=half, bits=32) as agg:
        values = numpy.full(5, rank, dtype=numpy.float32)
        agg.aggregate(values)
        members = [r for r in range(size) if r % 2 == rank % 2]
        assert agg.size == len(members) and numpy.all(values == sum(members)), values
    half.Free()
    return "mpi4py sub-communicator: ok"


def check_reduce_scatter(rank, size):
    with gradagg.Aggregator(bits=32) as agg:
        values = numpy.full(3001, rank + 1, dtype=numpy.float32)
        begin, count = agg.reduce_scatter(values)
        assert 0 <= begin and begin + count <= values.size, (begin, count)
        inside = numpy.zeros(values.size, dtype=bool)
        inside[begin:begin + count] = True
        assert numpy.all(values[inside] == size * (size + 1) // 2) and numpy.all(values[~inside] == rank + 1), values
    with gradagg.Aggregator(bits=1) as scatter, gradagg.Aggregator(bits=1) as whole:
        for step in range(2):
            a = scenario_value(5000, 11, rank, step)
            b = a.copy()
            begin, count = scatter.reduce_scatter(a)
            whole.aggregate(b)
            assert a[begin:begin + count].view(numpy.uint32).tolist() == \
                b[begin:begin + count].view(numpy.uint32).tolist(), f"the shard differs from aggregate() at {step}"


def check_shards(rank, size):
    with gradagg.ShardAggregator(bits=32) as shards:
        per_node = size // shards.nodes  # a node's ranks are consecutive
        local = rank % per_node
        group = [r for r in range(size) if r % per_node == local]
        assert shards.size == len(group) == shards.nodes, (shards.size, group, shards.nodes)
        values = numpy.full(0 if local == 1 else 5 + 3 * local, rank + 1, dtype=numpy.float32)
        shards.aggregate(values)
        assert numpy.all(values == sum(r + 1 for r in group)), (values, group)
        expect_usage_error(lambda: shards.aggregate_async(numpy.ones(3, dtype=numpy.float32)), "shard aggregator")
        if shards.nodes > 1:  # rank 0's shard one element longer than its local index's others: every rank raises
            odd = numpy.ones(5 + (1 if rank == 0 else 0) if local == 0 else 0 if local == 1 else 5 + 3 * local,
                             dtype=numpy.float32)
            expect_usage_error(lambda: shards.aggregate(odd), "rank")
        values = numpy.ones(7, dtype=numpy.float32)
        shards.aggregate(values)  # in step again
        assert numpy.all(values == len(group)), values


def main():
    gradagg.init()
    failures = 0
    notes = []
    with gradagg.Aggregator(bits=32) as probe:
        rank, size = probe.rank, probe.size
    checks = [("reference", lambda: check_reference(sys.argv[1], rank)),
              ("exact sums and header", lambda: check_exact_sums_and_header(rank, size)),
              ("errors", lambda: check_errors(rank, size)),
              ("shapes", lambda: check_shapes(size)),
              ("sub-communicator", lambda: notes.append(check_sub_communicator(rank, size))),
              ("reduce-scatter", lambda: check_reduce_scatter(rank, size)),
              ("shards", lambda: check_shards(rank, size))]
    for name, check in checks:
        try:
            check()
        except Exception:  # report every failing check on every rank, then fail together
            failures += 1
            print(f"python_numpy_test: rank {rank}: {name} failed:\n{traceback.format_exc()}", file=sys.stderr)
    with gradagg.Aggregator(bits=32) as agg:  # the ranks agree on the outcome
        total = numpy.array([failures], dtype=numpy.float32)
        agg.aggregate(total)
    if rank == 0 and total[0] == 0:
        print(f"python_numpy_test: PASS on {size} ranks ({'; '.join(n for n in notes if n)})")
    return 0 if total[0] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
