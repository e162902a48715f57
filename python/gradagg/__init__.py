"""gradagg from Python: sum gradients across MPI ranks, in place, over gradagg's C API (ctypes).

    import gradagg
    agg = gradagg.Aggregator(bits=1)          # collective; MPI is initialised if nobody has yet
    agg.aggregate([weights, bias])            # NumPy float32 arrays, or PyTorch tensors on CPU or GPU
    agg.aggregate(grads, header=gradagg.Header(num_samples=32))  # the header is summed over ranks too
    shards = gradagg.ShardAggregator(bits=1)  # sharded training: each rank's own shard summed across the nodes

Run under MPI: `mpirun -np 4 python3 train.py`. Options are keyword arguments (gradagg/options.h; unset ones come
from the GRADAGG_* environment variables, then the defaults). Errors raise UsageError (bad input; raised on every
rank), TimeoutError (a peer stopped answering) or GradaggError, with gradagg's message. PyTorch's DDP communication
hook is in gradagg.torch.
"""
from .aggregator import Aggregator, Pending, ShardAggregator
from .errors import GradaggError, TimeoutError, UsageError  # noqa: A004 (gradagg's own TimeoutError)
from .header import Header
from .lifecycle import finalize, init, world
from . import options  # noqa: F401 (gradagg.options.make_options: the bits the library would choose)

__all__ = ["Aggregator", "ShardAggregator", "Header", "Pending", "GradaggError", "UsageError", "TimeoutError",
           "init", "finalize", "world"]
