"""The per-call statistics summed beside the gradients (gradagg/gradient_header.h)."""
import ctypes

from . import _capi


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
