"""MPI's life under gradagg: init, finalize at exit (closing every open Aggregator first, in the same order on every
rank), and an uncaught exception ending every rank."""
import atexit
import ctypes
import itertools
import os
import sys
import weakref

from . import _capi
from .errors import check


def init():
    """Initialises MPI (thread level MULTIPLE) unless it is already (by mpi4py, say); returns the thread level."""
    provided = ctypes.c_int(0)
    check(_capi.lib.gradagg_mpi_init(ctypes.byref(provided)))
    return provided.value


def world():
    """(rank, size) of this process in MPI_COMM_WORLD, from MPI itself (initialised first if need be): the same under
    mpirun, srun, mpiexec or any other launcher."""
    init()
    rank, size = ctypes.c_int(), ctypes.c_int()
    check(_capi.lib.gradagg_world(ctypes.byref(rank), ctypes.byref(size)))
    return rank.value, size.value


def _abort_on_uncaught(kind, value, traceback):
    """sys.excepthook while gradagg is imported: an uncaught exception on a rank with an open Aggregator prints as
    usual, then ends every rank (MPI_Abort), as `python -m mpi4py` does; the other ranks would otherwise wait in
    their next call until GRADAGG_TIMEOUT. GRADAGG_ABORT_ON_EXCEPTION=0 turns it off."""
    if not open_aggregators or os.environ.get("GRADAGG_ABORT_ON_EXCEPTION", "1") == "0":
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
    """Closes every Aggregator still open, and destroys those the garbage collector took unclosed, then finalises MPI
    if init() initialised it. Runs at exit by itself. Closing may wait for the node's other ranks (freeing shared
    memory is collective), so every rank closes in the order the Aggregators were made, which is the same on every
    rank."""
    closing = [(aggregator._serial, aggregator.close) for aggregator in open_aggregators]
    closing += [(serial, lambda handle=handle: check(_capi.lib.gradagg_destroy(handle))) for serial, handle in _orphans]
    _orphans.clear()
    for _, close in sorted(closing, key=lambda item: item[0]):
        close()
    check(_capi.lib.gradagg_mpi_finalize())


def close_at_exit(serial, handle):
    """An Aggregator's C handle, from an Aggregator the garbage collector took before it was closed: finalize()
    destroys it in its place in the order of making."""
    _orphans.append((serial, handle))


def keep_until_exit(aggregators):
    """Holds `aggregators` open until finalize() closes them with the others at exit: for those whose owner may be
    freed at a different moment on each rank."""
    _kept.extend(aggregators)


open_aggregators = weakref.WeakSet()  # Aggregators to close before MPI goes away
_kept = []  # keep_until_exit's
_orphans = []  # close_at_exit's (serial, handle)
made = itertools.count()  # Aggregators made so far: their order, the same on every rank
atexit.register(finalize)  # after mpi4py's own exit hook if gradagg came first, before it otherwise
