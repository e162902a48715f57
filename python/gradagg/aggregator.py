"""gradagg.Aggregator over the C API: in place, blocking or in the background, host or device tensors."""
import ctypes

from . import _capi, lifecycle
from .errors import UsageError, check
from .options import make_options


def _tensor(item, index):
    """(gradagg_tensor, on_device, keep-alive) for a NumPy array or a PyTorch tensor."""
    module = type(item).__module__.split(".")[0]
    if module == "torch":
        import torch  # only where a tensor came from it
        types = {torch.float32: _capi.FLOAT32, torch.bfloat16: _capi.BFLOAT16, torch.float16: _capi.FLOAT16}
        if item.dtype not in types:
            raise UsageError(f"gradagg: tensor {index} is {item.dtype}; gradagg takes float32, bfloat16 or float16")
        if not item.is_contiguous():
            raise UsageError(f"gradagg: tensor {index} is not contiguous; pass .contiguous() and copy back")
        return _capi.Tensor(item.data_ptr(), item.numel(), types[item.dtype]), item.is_cuda, item
    if module == "numpy":
        import numpy
        if item.dtype != numpy.float32:
            raise UsageError(f"gradagg: array {index} is {item.dtype}; host gradients must be float32")
        if not (item.flags.c_contiguous or item.flags.f_contiguous) or not item.flags.writeable:
            raise UsageError(f"gradagg: array {index} must be contiguous and writeable (it is summed in place)")
        return _capi.Tensor(item.ctypes.data, item.size, _capi.FLOAT32), False, item
    raise UsageError(f"gradagg: item {index} is a {type(item).__name__}; pass NumPy arrays or PyTorch tensors")


class Pending:
    """A call running in the background (Aggregator.aggregate_async). wait() returns once the sums are in place."""

    def __init__(self, handle, header, c_header, keep):
        self._handle, self._header, self._c_header, self._keep = handle, header, c_header, keep

    def done(self):
        if self._handle is None:
            return True
        done = ctypes.c_int(0)
        check(_capi.lib.gradagg_done(self._handle, ctypes.byref(done)))
        return bool(done.value)

    def wait(self):
        if self._handle is None:
            return
        handle, self._handle = self._handle, None
        status = _capi.lib.gradagg_wait(handle)  # frees the handle, whatever the status
        if self._header is not None:
            self._header._from_c(*self._c_header)
        self._keep = None
        check(status)

    def __del__(self):
        if getattr(self, "_handle", None) is not None:
            _capi.lib.gradagg_wait(self._handle)  # never leave the call writing into freed arrays


class Aggregator:
    """Sums gradients across the ranks of `comm` (an mpi4py communicator; None = MPI_COMM_WORLD). Collective."""

    _create = "gradagg_create"

    def __init__(self, comm=None, **options):
        lifecycle.init()
        self._handle = ctypes.c_void_p()
        fortran = _capi.COMM_WORLD if comm is None else int(comm.py2f())
        create = getattr(_capi.lib, self._create)
        check(create(fortran, ctypes.byref(make_options(options)), ctypes.byref(self._handle)))
        rank, size, nodes, per_node = (ctypes.c_int() for _ in range(4))
        check(_capi.lib.gradagg_topology(self._handle, *(ctypes.byref(v) for v in (rank, size, nodes, per_node))))
        self.rank, self.size, self.nodes, self.ranks_per_node = rank.value, size.value, nodes.value, per_node.value
        node, local_rank = ctypes.c_int(), ctypes.c_int()
        check(_capi.lib.gradagg_placement(self._handle, ctypes.byref(node), ctypes.byref(local_rank)))
        self.node, self.local_rank = node.value, local_rank.value  # this rank's node, and its index inside it
        self._serial = next(lifecycle.made)
        lifecycle.open_aggregators.add(self)

    def close(self):
        """Frees the aggregator (local; waits for a background call). The object is unusable afterwards."""
        if getattr(self, "_handle", None):
            handle, self._handle = self._handle, None
            lifecycle.open_aggregators.discard(self)
            check(_capi.lib.gradagg_destroy(handle))

    def __del__(self):
        """Collected before close(): the handle is destroyed at exit with the others, in the order they were made on
        every rank (lifecycle.finalize), not now: destroying frees shared memory together with the node's other
        ranks, whose collectors run at other moments."""
        handle = getattr(self, "_handle", None)
        if handle:
            self._handle = None
            lifecycle.close_at_exit(self._serial, handle)

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        self.close()

    def _prepare(self, tensors, header, stream):
        self._live()
        if not isinstance(tensors, (list, tuple)):
            tensors = [tensors]
        converted = [_tensor(t, i) for i, t in enumerate(tensors)]
        devices = {on_device for _, on_device, _ in converted}
        if len(devices) > 1:
            raise UsageError("gradagg: one call takes host tensors or device tensors, not both")
        on_device = devices.pop() if devices else False
        array = (_capi.Tensor * max(len(converted), 1))(*[c for c, _, _ in converted])
        if on_device and stream is None:
            import torch
            stream = torch.cuda.current_stream().cuda_stream
        c_header = header._to_c() if header is not None else None
        keep = (array, [k for _, _, k in converted], c_header)
        return array, len(converted), on_device, stream, c_header, keep

    def aggregate(self, tensors, header=None, stream=None):
        """Collective: replaces each tensor by its sum over all ranks (and sums `header` in place). Device tensors
        work on `stream` (default: PyTorch's current stream) and are in place when this returns."""
        array, count, on_device, stream, c_header, _ = self._prepare(tensors, header, stream)
        header_pointer = ctypes.byref(c_header[0]) if c_header else None
        if on_device:
            status = _capi.lib.gradagg_aggregate_device(self._handle, array, count, stream, header_pointer)
        else:
            status = _capi.lib.gradagg_aggregate(self._handle, array, count, header_pointer)
        check(status)
        if header is not None:
            header._from_c(*c_header)

    def reduce_scatter(self, tensors, header=None):
        """Collective, host tensors: a reduce-scatter. Returns (begin, count), this rank's shard of the tensors'
        elements end to end, which then holds what aggregate() would put there; the rest keeps this rank's input."""
        array, count, on_device, _, c_header, _ = self._prepare(tensors, header, None)
        if on_device:
            raise UsageError("gradagg: reduce_scatter takes host tensors (NumPy, or PyTorch on the CPU)")
        header_pointer = ctypes.byref(c_header[0]) if c_header else None
        begin, elements = ctypes.c_size_t(), ctypes.c_size_t()
        check(_capi.lib.gradagg_reduce_scatter(self._handle, array, count, header_pointer, ctypes.byref(begin),
                                               ctypes.byref(elements)))
        if header is not None:
            header._from_c(*c_header)
        return begin.value, elements.value

    def aggregate_async(self, tensors, header=None, stream=None):
        """Collective, in the background: returns a Pending at once; leave the tensors (and header) alone until its
        wait() returns."""
        array, count, on_device, stream, c_header, keep = self._prepare(tensors, header, stream)
        header_pointer = ctypes.byref(c_header[0]) if c_header else None
        pending = ctypes.c_void_p()
        if on_device:
            status = _capi.lib.gradagg_aggregate_device_async(self._handle, array, count, stream, header_pointer,
                                                              ctypes.byref(pending))
        else:
            status = _capi.lib.gradagg_aggregate_async(self._handle, array, count, header_pointer,
                                                       ctypes.byref(pending))
        check(status)
        return Pending(pending, header, c_header, keep)

    def register_device_buffer(self, tensor):
        """Collective: lets calls whose gradient is one float32 tensor inside `tensor`'s memory work in place."""
        check(_capi.lib.gradagg_register_device_buffer(self._handle, tensor.data_ptr(),
                                                        tensor.numel() * tensor.element_size()))

    def deregister_device_buffer(self, tensor):
        check(_capi.lib.gradagg_deregister_device_buffer(self._handle, tensor.data_ptr()))

    def reset_residuals(self):
        """Local: forget the quantization error carried between calls."""
        check(_capi.lib.gradagg_reset_residuals(self._handle))

    def export_residuals(self):
        """Local: the quantization error carried after the last call, for a checkpoint: a dict of "tensor_sizes" (that
        call's, a list of ints), "stripe" and "own" (float32 NumPy arrays: what this rank owes, for its place in the
        topology; empty on one node). Waits for a background call first."""
        import numpy
        counts = [ctypes.c_size_t() for _ in range(3)]
        check(_capi.lib.gradagg_residual_sizes(self._live(), *(ctypes.byref(c) for c in counts)))
        sizes = (ctypes.c_size_t * max(counts[0].value, 1))()
        stripe, own = (numpy.zeros(c.value, numpy.float32) for c in counts[1:])
        floats = ctypes.POINTER(ctypes.c_float)
        check(_capi.lib.gradagg_export_residuals(self._handle, sizes, stripe.ctypes.data_as(floats),
                                                  own.ctypes.data_as(floats)))
        return {"tensor_sizes": list(sizes[:counts[0].value]), "stripe": stripe, "own": own}

    def import_residuals(self, residuals):
        """Local: the next call (which must have residuals["tensor_sizes"]) starts from what export_residuals gave on
        this rank of the same topology (arrays or tensors of float32 values). UsageError for residuals that cannot be
        this rank's."""
        import numpy
        sizes = [int(size) for size in residuals["tensor_sizes"]]
        stripe, own = (numpy.ascontiguousarray(numpy.asarray(residuals[name], dtype=numpy.float32))
                       for name in ("stripe", "own"))
        floats = ctypes.POINTER(ctypes.c_float)
        check(_capi.lib.gradagg_import_residuals(
            self._live(), (ctypes.c_size_t * max(len(sizes), 1))(*sizes), len(sizes),
            stripe.ctypes.data_as(floats), stripe.size, own.ctypes.data_as(floats), own.size))

    def _live(self):
        if self._handle is None:
            raise UsageError("gradagg: this Aggregator is closed")
        return self._handle

    @property
    def stats(self):
        """Of the last finished call: seconds per phase, bytes across nodes, non-finite buckets."""
        stats = self._last_stats()
        return {name: getattr(stats, name) for name, _ in _capi.Stats._fields_}

    def _last_stats(self):
        """stats as the C API's struct: what the PyTorch hooks read a field or two of after every call, without
        building the dictionary."""
        stats = _capi.Stats()
        check(_capi.lib.gradagg_last_stats(self._handle, ctypes.byref(stats)))
        return stats

    def describe(self):
        """The effective options in one line."""
        return _capi.lib.gradagg_describe(self._handle).decode()


class ShardAggregator(Aggregator):
    """Sharded training's exchange (include/gradagg/shard_aggregator.h): every rank of a node (ranks_per_node, as for
    Aggregator) holds its own shard, already reduced over the node; aggregate() sums it across the nodes among the
    ranks of its local index, in place, and a failure anywhere raises on every rank of `comm`. rank, size, nodes,
    stats and the residuals are those of the exchange across the nodes; aggregate() only (no aggregate_async or
    reduce_scatter).
    Collective."""

    _create = "gradagg_create_shard"

