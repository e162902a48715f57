"""A rank that raises ends the job: 2 ranks aggregate NumPy arrays each step; rank 1 raises at step 3 without
catching it. With gradagg's excepthook every rank is gone within seconds (uncaught_exception_test.sh times it);
without it (GRADAGG_ABORT_ON_EXCEPTION=0) rank 0 waits in its next call until GRADAGG_TIMEOUT."""
import os

import numpy

import gradagg

rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
aggregator = gradagg.Aggregator()
gradient = numpy.ones(1 << 16, dtype=numpy.float32)
for step in range(1000):
    if rank == 1 and step == 3:
        raise RuntimeError(f"rank {rank} fails at step {step}")
    aggregator.aggregate([gradient])
