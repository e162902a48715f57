"""gradagg's exceptions, and the C API's status turned into them."""
from . import _capi


class GradaggError(RuntimeError):
    """A failure on this rank (MPI, CUDA, ...): end the job."""


class UsageError(GradaggError, ValueError):
    """Bad or mismatched arguments, reported on every rank of the call."""


class TimeoutError(GradaggError):  # noqa: A001 (gradagg's own, also a GradaggError)
    """A peer rank stopped answering within the timeout: end the job."""


def check(status):
    """Raises the exception of a C API status (with gradagg's message), or nothing for OK."""
    if status == _capi.OK:
        return
    message = _capi.lib.gradagg_last_error().decode("utf-8", "replace")
    raise {_capi.ERROR_USAGE: UsageError, _capi.ERROR_TIMEOUT: TimeoutError}.get(status, GradaggError)(message)
