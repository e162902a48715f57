"""A rank that raises ends the job: 2 ranks aggregate NumPy arrays each step; rank 1 raises at step 3 without
catching it. With gradagg's excepthook every rank is gone within seconds (uncaught_exception_test.sh times it);
without it (GRADAGG_ABORT_ON_EXCEPTION=0) rank 0 waits in its next call until GRADAGG_TIMEOUT. With the argument
"wrapped", gradagg's excepthook is wrapped the way torch.distributed's init_process_group (torch 2) wraps it: sys.stderr
pointed at a buffer while it runs, written out with each line behind "[rankN]: " after it returns."""
import io
import os
import sys

import numpy

import gradagg

if sys.argv[1:] == ["wrapped"]:
    inner = sys.excepthook

    def wrapper(*args):
        saved, sys.stderr = sys.stderr, io.StringIO()
        try:
            inner(*args)
        finally:
            buffered, sys.stderr = sys.stderr.getvalue(), saved
        sys.stderr.write("\n".join(f"[rank{os.environ['OMPI_COMM_WORLD_RANK']}]: {line}" for line in
                                    buffered.split("\n")))
        sys.stderr.flush()

    sys.excepthook = wrapper

rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
aggregator = gradagg.Aggregator()
gradient = numpy.ones(1 << 16, dtype=numpy.float32)
for step in range(1000):
    if rank == 1 and step == 3:
        raise RuntimeError(f"rank {rank} fails at step {step}")
    aggregator.aggregate([gradient])
