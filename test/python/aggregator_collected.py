"""An Aggregator that the garbage collector takes on one rank of a node but not on the others: its destruction (which
frees shared memory together with the node's other ranks) must not run there and then. Under mpirun as one node of
2 ranks with a short GRADAGG_TIMEOUT, rank 0 drops its Aggregator and collects; then both ranks aggregate with
another Aggregator, and every rank ends cleanly (gradagg closes both at exit, in the order they were made). Before,
rank 0 waited GRADAGG_TIMEOUT for rank 1 inside the collector and the job was aborted.
    GRADAGG_RANKS_PER_NODE=0 GRADAGG_TIMEOUT=3 mpirun -np 2 python3 aggregator_collected.py
Prints "aggregator_collected: PASS" on rank 0."""
import gc
import time

import numpy

import gradagg

dropped = gradagg.Aggregator(bits=32)
kept = gradagg.Aggregator(bits=32)
rank, size = kept.rank, kept.size
start = time.monotonic()
if rank == 0:
    del dropped
    gc.collect()
seconds = time.monotonic() - start
assert seconds < 1.0, f"rank {rank}: dropping an Aggregator took {seconds:.1f} s: it waited for the node"
grads = [numpy.ones(100, numpy.float32)]
kept.aggregate(grads)
assert grads[0][0] == size, grads[0][0]
if rank == 0:
    print(f"aggregator_collected: PASS on {size} ranks")
