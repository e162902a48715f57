"""What gradagg's PyTorch hooks share, under DDP (ddp_state.py), FSDP2 (fsdp.py) and local steps (local_steps.py): the
width rule, the count of what crossed the nodes, and the checkpoint form of an Aggregator's carried error."""
import os
import sys

import torch

from ..errors import UsageError
from ..lifecycle import world
from ..options import make_options

# A hook's width when neither bits= nor GRADAGG_BITS gives one and it has no early phase (FSDP2's hook): the fewest
# bits at which AdamW reached DDP's loss on every GPT measured at one width (10.8M to 152M parameters;
# bench/results/gpt/). The DDP hook's default is 1 bit behind an automatic early phase at 2 (gradagg.torch). The
# library's own default, for the CLI and C++, is 1 bit.
DEFAULT_BITS = 2


def width_given(options):
    """Whether bits= or GRADAGG_BITS chooses a hook's width (an empty GRADAGG_BITS counts as unset, as in C++)."""
    return "bits" in options or bool(os.environ.get("GRADAGG_BITS"))


def hook_options(options):
    """A hook's Aggregator options: `options`, with DEFAULT_BITS where neither they nor GRADAGG_BITS give a width."""
    return dict(options) if width_given(options) else dict(options, bits=DEFAULT_BITS)


class HookTraffic:
    """Bytes a hook's rank sent across nodes, and what float32 would have sent, over every call so far."""

    def __init__(self):
        self.bytes_sent = 0
        self.float_bytes = 0

    def _count(self, aggregator):
        stats = aggregator._last_stats()
        self.bytes_sent += stats.inter_node_bytes_sent
        self.float_bytes += stats.inter_node_float_bytes

    def bits_per_element(self):
        """Bits this rank sent across nodes per gradient element, averaged over every call so far (None before
        anything crossed nodes, as on one node)."""
        return 32.0 * self.bytes_sent / self.float_bytes if self.float_bytes else None


# The Aggregator options that change what a hook returns, compared when a checkpoint is loaded; the others move the
# same numbers differently (transport, staging, the size of the pieces) or only watch (deadline, timing, trace).
# ranks_per_node is the topology, checked apart. The width is saved as it took effect.
RESULT_OPTIONS = ("bucket_size", "error_feedback", "mean_threshold", "quantize_own_stripe")


def result_options(options):
    """The result-changing options as they take effect: the library's defaults and GRADAGG_* variables, then
    `options`."""
    effective = make_options({name: value for name, value in options.items() if name != "bits"})
    return {name: int(getattr(effective, name)) for name in RESULT_OPTIONS}


def same_settings(saved, mine, given):
    """Whether a hook checkpoint's settings are `mine`: everything alike but the options, and the result-changing
    options ("result_options", as they took effect) alike. Checkpoints of earlier versions held the options under
    "options", as given (or for a while as they took effect): each result-changing one there is compared with its
    value now, and one `given` now that the checkpoint lacks must take effect as the library's default does."""
    def rest(settings):
        return {name: value for name, value in settings.items() if name not in ("options", "result_options")}
    if rest(saved) != rest(mine):
        return False
    effective = mine["result_options"]
    if "result_options" in saved:
        kept = saved["result_options"]
        return all(kept[name] == value for name, value in effective.items() if name in kept)
    kept, default = saved.get("options", {}), result_options({})
    return all(kept[name] == value if name in kept else name not in given or value == default[name]
               for name, value in effective.items())


def checkpoint_residuals(aggregator):
    """An Aggregator's carried error as a checkpoint holds it (None without an Aggregator): export_residuals() with
    its arrays as tensors, which import_residuals() takes back."""
    if aggregator is None:
        return None
    residuals = aggregator.export_residuals()
    return dict(residuals, stripe=torch.from_numpy(residuals["stripe"]), own=torch.from_numpy(residuals["own"]))


# Modules between a gradagg state's method and whoever called it: torch's optimizer wrappers, decorators.
_PASSED_THROUGH = ("gradagg.", "torch.optim.", "torch.utils._contextlib", "torch._dynamo", "torch._compile",
                   "functools", "contextlib", "typing_extensions")


def distributed_checkpoint_calls():
    """The function of torch.distributed.checkpoint (DCP) that called the gradagg method running this, or None where
    someone else did (a user's own state_dict() that DCP calls in turn is the user's, not DCP's)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").startswith(_PASSED_THROUGH):
        frame = frame.f_back
    module = "" if frame is None else frame.f_globals.get("__name__", "")
    dcp = module == "torch.distributed.checkpoint" or module.startswith("torch.distributed.checkpoint.")
    return frame.f_code.co_name if dcp else None


def refuse_distributed_checkpoint(what):
    """Raises UsageError where torch.distributed.checkpoint (DCP) calls `what`'s state_dict() or load_state_dict(). DCP
    keeps one copy of what every rank holds under one name, and gradagg's states are each rank's own (the carried
    quantization error per node and stripe, each rank's second moment). Each rank saves its own with torch.save."""
    if distributed_checkpoint_calls() is None:
        return
    rank = world()[0]
    raise UsageError(
        f"{what} (rank {rank}): torch.distributed.checkpoint cannot hold its state: that is each rank's own (the "
        "carried quantization error, each rank's second moment), and DCP keeps one copy of what the ranks hold under "
        "one name. Save it on every rank with torch.save, beside the model (which DCP may still hold): "
        "torch.save({'optimizer': optimizer.state_dict(), 'gradagg': state.state_dict()}, "
        "f'checkpoint_rank{rank}.pt') (docs/python.md, \"Checkpoints\")")
