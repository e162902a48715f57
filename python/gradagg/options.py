"""Aggregator options as keyword arguments (gradagg/options.h; gradagg_c.h's gradagg_options)."""
import ctypes

from . import _capi
from .errors import UsageError, check

OPTION_FIELDS = ("bits", "bucket_size", "error_feedback", "mean_threshold", "quantize_own_stripe", "ranks_per_node",
                  "cuda_aware_mpi", "staging_chunk_bytes", "double_buffered", "timeout_seconds", "timing",
                  "trace_level", "piece_bytes")
TRANSPORTS = {"auto": -1, None: -1, False: 0, "off": 0, "staged": 0, True: 1, "on": 1}


def make_options(settings):
    """The C API's options from keyword arguments: the library's defaults and GRADAGG_* variables, then these."""
    unknown = sorted(set(settings) - set(OPTION_FIELDS))
    if unknown:
        raise TypeError(f"gradagg: unknown option(s) {', '.join(unknown)}; known: {', '.join(OPTION_FIELDS)}")
    options = _capi.Options()
    check(_capi.lib.gradagg_options_init(ctypes.byref(options)))
    for name, value in settings.items():
        if name == "cuda_aware_mpi":
            if value not in TRANSPORTS:
                raise UsageError(f"gradagg: cuda_aware_mpi must be 'auto', True or False, not {value!r}")
            value = TRANSPORTS[value]
        elif isinstance(value, bool):
            value = int(value)
        setattr(options, name, value)
    return options
