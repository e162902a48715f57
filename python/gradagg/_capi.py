"""ctypes declarations of gradagg's C API (gradagg/gradagg_c.h) and where the library is found."""
import ctypes
import ctypes.util
import os

C_API_VERSION = 6

OK, ERROR_USAGE, ERROR_TIMEOUT, ERROR_RUNTIME = 0, 1, 2, 3
FLOAT32, BFLOAT16, FLOAT16 = 0, 1, 2
COMM_WORLD = -1


class Options(ctypes.Structure):
    _fields_ = [("bits", ctypes.c_int), ("bucket_size", ctypes.c_size_t), ("error_feedback", ctypes.c_int),
                ("mean_threshold", ctypes.c_int), ("quantize_own_stripe", ctypes.c_int),
                ("ranks_per_node", ctypes.c_int), ("cuda_aware_mpi", ctypes.c_int),
                ("staging_chunk_bytes", ctypes.c_size_t), ("double_buffered", ctypes.c_int),
                ("timeout_seconds", ctypes.c_double), ("timing", ctypes.c_int), ("trace_level", ctypes.c_int),
                ("piece_bytes", ctypes.c_size_t)]


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("count", ctypes.c_size_t), ("type", ctypes.c_int)]


class Header(ctypes.Structure):
    _fields_ = [("num_samples", ctypes.c_uint64), ("num_samples_with_label", ctypes.c_uint64),
                ("criterion", ctypes.c_double), ("eval_error_count", ctypes.c_size_t),
                ("eval_error_sums", ctypes.POINTER(ctypes.c_double)),
                ("eval_error_samples", ctypes.POINTER(ctypes.c_uint64))]


class Stats(ctypes.Structure):
    _fields_ = [(name, ctypes.c_double) for name in
                ("agreement", "reduce_scatter", "quantize", "exchange", "decode", "all_gather", "total")] + [
        ("inter_node_bytes_sent", ctypes.c_size_t), ("inter_node_float_bytes", ctypes.c_size_t),
        ("non_finite_buckets", ctypes.c_size_t), ("in_place", ctypes.c_int)]


def _candidates():
    """Where libgradagg_c.so may be, in the order tried."""
    explicit = os.environ.get("GRADAGG_LIBRARY")
    if explicit:
        return [explicit]
    here = os.path.dirname(os.path.abspath(__file__))
    found = [os.path.join(here, "libgradagg_c.so"),  # installed with the package (pip install .)
             os.path.join(os.path.dirname(os.path.dirname(here)), "build", "lib", "libgradagg_c.so")]  # source tree
    system = ctypes.util.find_library("gradagg_c")
    return found + ([system] if system else [])


def _load():
    # Open MPI's components are plugins that need libmpi's symbols global: load it so before gradagg (mpi4py, if
    # imported first, has done the same).
    for name in ("libmpi.so.40", "libmpi.so"):
        try:
            ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
            break
        except OSError:
            continue
    tried = []
    for path in _candidates():
        if not os.path.exists(path) and os.sep in path:
            tried.append(path + " (missing)")
            continue
        try:
            return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as error:
            tried.append(f"{path} ({error})")
    raise ImportError("gradagg: cannot load libgradagg_c.so; install the package (pip install . in the repository), "
                      "or build it (scripts/build.sh) and set GRADAGG_LIBRARY. Tried: " + "; ".join(tried))


lib = _load()

_handle = ctypes.c_void_p
_signatures = {
    "gradagg_last_error": (ctypes.c_char_p, []),
    "gradagg_mpi_init": (ctypes.c_int, [ctypes.POINTER(ctypes.c_int)]),
    "gradagg_mpi_finalize": (ctypes.c_int, []),
    "gradagg_world": (ctypes.c_int, [ctypes.POINTER(ctypes.c_int)] * 2),
    "gradagg_mpi_abort": (ctypes.c_int, [ctypes.c_int]),
    "gradagg_options_init": (ctypes.c_int, [ctypes.POINTER(Options)]),
    "gradagg_create": (ctypes.c_int, [ctypes.c_int64, ctypes.POINTER(Options), ctypes.POINTER(_handle)]),
    "gradagg_create_shard": (ctypes.c_int, [ctypes.c_int64, ctypes.POINTER(Options), ctypes.POINTER(_handle)]),
    "gradagg_destroy": (ctypes.c_int, [_handle]),
    "gradagg_aggregate": (ctypes.c_int, [_handle, ctypes.POINTER(Tensor), ctypes.c_size_t, ctypes.POINTER(Header)]),
    "gradagg_reduce_scatter": (ctypes.c_int, [_handle, ctypes.POINTER(Tensor), ctypes.c_size_t, ctypes.POINTER(Header),
                                              ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]),
    "gradagg_aggregate_device": (ctypes.c_int, [_handle, ctypes.POINTER(Tensor), ctypes.c_size_t, ctypes.c_void_p,
                                                ctypes.POINTER(Header)]),
    "gradagg_aggregate_async": (ctypes.c_int, [_handle, ctypes.POINTER(Tensor), ctypes.c_size_t,
                                               ctypes.POINTER(Header), ctypes.POINTER(_handle)]),
    "gradagg_aggregate_device_async": (ctypes.c_int, [_handle, ctypes.POINTER(Tensor), ctypes.c_size_t,
                                                      ctypes.c_void_p, ctypes.POINTER(Header),
                                                      ctypes.POINTER(_handle)]),
    "gradagg_wait": (ctypes.c_int, [_handle]),
    "gradagg_done": (ctypes.c_int, [_handle, ctypes.POINTER(ctypes.c_int)]),
    "gradagg_register_device_buffer": (ctypes.c_int, [_handle, ctypes.c_void_p, ctypes.c_size_t]),
    "gradagg_deregister_device_buffer": (ctypes.c_int, [_handle, ctypes.c_void_p]),
    "gradagg_reset_residuals": (ctypes.c_int, [_handle]),
    "gradagg_residual_sizes": (ctypes.c_int, [_handle] + [ctypes.POINTER(ctypes.c_size_t)] * 3),
    "gradagg_export_residuals": (ctypes.c_int, [_handle, ctypes.POINTER(ctypes.c_size_t),
                                                ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_float)]),
    "gradagg_import_residuals": (ctypes.c_int, [_handle, ctypes.POINTER(ctypes.c_size_t), ctypes.c_size_t,
                                                ctypes.POINTER(ctypes.c_float), ctypes.c_size_t,
                                                ctypes.POINTER(ctypes.c_float), ctypes.c_size_t]),
    "gradagg_last_stats": (ctypes.c_int, [_handle, ctypes.POINTER(Stats)]),
    "gradagg_topology": (ctypes.c_int, [_handle] + [ctypes.POINTER(ctypes.c_int)] * 4),
    "gradagg_placement": (ctypes.c_int, [_handle] + [ctypes.POINTER(ctypes.c_int)] * 2),
    "gradagg_describe": (ctypes.c_char_p, [_handle]),
}
for _name, (_result, _arguments) in _signatures.items():
    _function = getattr(lib, _name)
    _function.restype = _result
    _function.argtypes = _arguments
