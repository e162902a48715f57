"""gradagg from Python: sum gradients across MPI ranks, in place, over gradagg's C API (ctypes).

    import gradagg
    agg = gradagg.Aggregator(bits=1)          # collective; MPI is initialised if nobody has yet
    agg.aggregate([weights, bias])            # NumPy float32 arrays, or PyTorch tensors on CPU or GPU
    agg.aggregate(grads, header=gradagg.Header(num_samples=32))  # the header is summed over ranks too

Run under MPI: `mpirun -np 4 python3 train.py`. Options are keyword arguments (gradagg/options.h; unset ones come
from the GRADAGG_* environment variables, then the defaults). Errors raise UsageError (bad input; raised on every
rank), TimeoutError (a peer stopped answering) or GradaggError, with gradagg's message. PyTorch's DDP communication
hook is in gradagg.torch.
"""
import atexit
import ctypes
import itertools
import os
import sys
import weakref

from . import _capi

__all__ = ["Aggregator", "Header", "Pending", "GradaggError", "UsageError", "TimeoutError", "init", "finalize"]


class GradaggError(RuntimeError):
    """A failure on this rank (MPI, CUDA, ...): end the job."""


class UsageError(GradaggError, ValueError):
    """Bad or mismatched arguments, reported on every rank of the call."""


class TimeoutError(GradaggError):  # noqa: A001 (gradagg's own, also a GradaggError)
    """A peer rank stopped answering within the timeout: end the job."""


def _check(status):
    if status == _capi.OK:
        return
    message = _capi.lib.gradagg_last_error().decode("utf-8", "replace")
    raise {_capi.ERROR_USAGE: UsageError, _capi.ERROR_TIMEOUT: TimeoutError}.get(status, GradaggError)(message)


def init():
    """Initialises MPI (thread level MULTIPLE) unless it is already (by mpi4py, say); returns the thread level."""
    provided = ctypes.c_int(0)
    _check(_capi.lib.gradagg_mpi_init(ctypes.byref(provided)))
    return provided.value


def _abort_on_uncaught(kind, value, traceback):
    """sys.excepthook while gradagg is imported: an uncaught exception on a rank with an open Aggregator prints as
    usual, then ends every rank (MPI_Abort), as `python -m mpi4py` does; the other ranks would otherwise wait in
    their next call until GRADAGG_TIMEOUT. GRADAGG_ABORT_ON_EXCEPTION=0 turns it off."""
    if not _open or os.environ.get("GRADAGG_ABORT_ON_EXCEPTION", "1") == "0":
        _previous_excepthook(kind, value, traceback)
        return
    # A hook that wraps this one may point sys.stderr at a buffer that it writes out once this one returns:
    # torch.distributed's init_process_group (torch 2) does, to put the rank before each line. This one does not
    # return, so the traceback and its line go to the process's own stderr (on the GPU machine they were lost).
    wrapped, sys.stderr = sys.stderr, sys.__stderr__ or sys.stderr
    try:
        _previous_excepthook(kind, value, traceback)
        rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "?"))
        sys.stderr.write(f"gradagg: rank {rank}: uncaught {kind.__name__}; ending every rank (MPI_Abort)\n")
        sys.stderr.flush()
    finally:
        sys.stderr = wrapped
    _capi.lib.gradagg_mpi_abort(1)


_previous_excepthook = sys.excepthook
sys.excepthook = _abort_on_uncaught


def finalize():
    """Closes every Aggregator still open, then finalises MPI if init() initialised it. Runs at exit by itself.
    Closing may wait for the node's other ranks (freeing shared memory is collective), so every rank closes in the
    order the Aggregators were made, which is the same on every rank."""
    for aggregator in sorted(_open, key=lambda a: a._serial):
        aggregator.close()
    _check(_capi.lib.gradagg_mpi_finalize())


_open = weakref.WeakSet()  # Aggregators to close before MPI goes away
_made = itertools.count()  # Aggregators made so far: their order, the same on every rank
atexit.register(finalize)  # after mpi4py's own exit hook if gradagg came first, before it otherwise


class Header:
    """The per-call training statistics summed over all ranks (gradagg/gradient_header.h). num_samples == 0 makes a
    rank contribute zero gradients. eval_errors: a list of (error_sum, num_samples), the same length on every rank."""

    def __init__(self, num_samples=0, num_samples_with_label=0, criterion=0.0, eval_errors=()):
        self.num_samples = num_samples
        self.num_samples_with_label = num_samples_with_label
        self.criterion = criterion
        self.eval_errors = list(eval_errors)

    def __repr__(self):
        return (f"Header(num_samples={self.num_samples}, num_samples_with_label={self.num_samples_with_label}, "
                f"criterion={self.criterion}, eval_errors={self.eval_errors})")

    def _to_c(self):
        count = len(self.eval_errors)
        sums = (ctypes.c_double * max(count, 1))(*[float(e[0]) for e in self.eval_errors])
        samples = (ctypes.c_uint64 * max(count, 1))(*[int(e[1]) for e in self.eval_errors])
        c = _capi.Header(int(self.num_samples), int(self.num_samples_with_label), float(self.criterion), count,
                         ctypes.cast(sums, ctypes.POINTER(ctypes.c_double)),
                         ctypes.cast(samples, ctypes.POINTER(ctypes.c_uint64)))
        return c, (sums, samples)

    def _from_c(self, c, arrays):
        self.num_samples = c.num_samples
        self.num_samples_with_label = c.num_samples_with_label
        self.criterion = c.criterion
        sums, samples = arrays
        self.eval_errors = [(sums[i], samples[i]) for i in range(len(self.eval_errors))]


_OPTION_FIELDS = ("bits", "bucket_size", "error_feedback", "mean_threshold", "quantize_own_stripe", "ranks_per_node",
                  "cuda_aware_mpi", "staging_chunk_bytes", "double_buffered", "timeout_seconds", "timing",
                  "trace_level", "piece_bytes")
_TRANSPORTS = {"auto": -1, None: -1, False: 0, "off": 0, "staged": 0, True: 1, "on": 1}


def _options(settings):
    unknown = sorted(set(settings) - set(_OPTION_FIELDS))
    if unknown:
        raise TypeError(f"gradagg: unknown option(s) {', '.join(unknown)}; known: {', '.join(_OPTION_FIELDS)}")
    options = _capi.Options()
    _check(_capi.lib.gradagg_options_init(ctypes.byref(options)))
    for name, value in settings.items():
        if name == "cuda_aware_mpi":
            if value not in _TRANSPORTS:
                raise UsageError(f"gradagg: cuda_aware_mpi must be 'auto', True or False, not {value!r}")
            value = _TRANSPORTS[value]
        elif isinstance(value, bool):
            value = int(value)
        setattr(options, name, value)
    return options


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
        _check(_capi.lib.gradagg_done(self._handle, ctypes.byref(done)))
        return bool(done.value)

    def wait(self):
        if self._handle is None:
            return
        handle, self._handle = self._handle, None
        status = _capi.lib.gradagg_wait(handle)  # frees the handle, whatever the status
        if self._header is not None:
            self._header._from_c(*self._c_header)
        self._keep = None
        _check(status)

    def __del__(self):
        if getattr(self, "_handle", None) is not None:
            _capi.lib.gradagg_wait(self._handle)  # never leave the call writing into freed arrays


class Aggregator:
    """Sums gradients across the ranks of `comm` (an mpi4py communicator; None = MPI_COMM_WORLD). Collective."""

    def __init__(self, comm=None, **options):
        init()
        self._handle = ctypes.c_void_p()
        fortran = _capi.COMM_WORLD if comm is None else int(comm.py2f())
        _check(_capi.lib.gradagg_create(fortran, ctypes.byref(_options(options)), ctypes.byref(self._handle)))
        rank, size, nodes, per_node = (ctypes.c_int() for _ in range(4))
        _check(_capi.lib.gradagg_topology(self._handle, *(ctypes.byref(v) for v in (rank, size, nodes, per_node))))
        self.rank, self.size, self.nodes, self.ranks_per_node = rank.value, size.value, nodes.value, per_node.value
        self._serial = next(_made)
        _open.add(self)

    def close(self):
        """Frees the aggregator (local; waits for a background call). The object is unusable afterwards."""
        if getattr(self, "_handle", None):
            handle, self._handle = self._handle, None
            _open.discard(self)
            _check(_capi.lib.gradagg_destroy(handle))

    __del__ = close

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
        _check(status)
        if header is not None:
            header._from_c(*c_header)

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
        _check(status)
        return Pending(pending, header, c_header, keep)

    def register_device_buffer(self, tensor):
        """Collective: lets calls whose gradient is one float32 tensor inside `tensor`'s memory work in place."""
        _check(_capi.lib.gradagg_register_device_buffer(self._handle, tensor.data_ptr(),
                                                        tensor.numel() * tensor.element_size()))

    def deregister_device_buffer(self, tensor):
        _check(_capi.lib.gradagg_deregister_device_buffer(self._handle, tensor.data_ptr()))

    def reset_residuals(self):
        """Local: forget the quantization error carried between calls."""
        _check(_capi.lib.gradagg_reset_residuals(self._handle))

    def export_residuals(self):
        """Local: the quantization error carried after the last call, for a checkpoint: a dict of "tensor_sizes" (that
        call's, a list of ints), "stripe" and "own" (float32 NumPy arrays: what this rank owes, for its place in the
        topology; empty on one node). Waits for a background call first."""
        import numpy
        counts = [ctypes.c_size_t() for _ in range(3)]
        _check(_capi.lib.gradagg_residual_sizes(self._live(), *(ctypes.byref(c) for c in counts)))
        sizes = (ctypes.c_size_t * max(counts[0].value, 1))()
        stripe, own = (numpy.zeros(c.value, numpy.float32) for c in counts[1:])
        floats = ctypes.POINTER(ctypes.c_float)
        _check(_capi.lib.gradagg_export_residuals(self._handle, sizes, stripe.ctypes.data_as(floats),
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
        _check(_capi.lib.gradagg_import_residuals(
            self._live(), (ctypes.c_size_t * max(len(sizes), 1))(*sizes), len(sizes),
            stripe.ctypes.data_as(floats), stripe.size, own.ctypes.data_as(floats), own.size))

    def _live(self):
        if self._handle is None:
            raise UsageError("gradagg: this Aggregator is closed")
        return self._handle

    @property
    def stats(self):
        """Of the last finished call: seconds per phase, bytes across nodes, non-finite buckets."""
        stats = _capi.Stats()
        _check(_capi.lib.gradagg_last_stats(self._handle, ctypes.byref(stats)))
        return {name: getattr(stats, name) for name, _ in _capi.Stats._fields_}

    def describe(self):
        """The effective options in one line."""
        return _capi.lib.gradagg_describe(self._handle).decode()
