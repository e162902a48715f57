"""What gradagg's PyTorch hooks share, under DDP (gradagg.torch) and FSDP2 (gradagg.torch_fsdp): the width rule, the
count of what crossed the nodes, and the checkpoint form of an Aggregator's carried error."""
import os

import torch

# The hooks' width when neither bits= nor GRADAGG_BITS gives one: the fewest bits at which AdamW reached DDP's loss on
# every GPT measured, 10.8M to 152M parameters (at 1 bit an 85M one ended 1.2% behind over 3 seeds, 7-8% in the middle
# of the run; bench/results/gpt/85m/). The library's own default, for the CLI and C++, stays 1 bit.
DEFAULT_BITS = 2


def hook_options(options):
    """A hook's Aggregator options: `options`, with DEFAULT_BITS where neither they nor GRADAGG_BITS give a width (an
    empty GRADAGG_BITS counts as unset, as in C++)."""
    if "bits" not in options and not os.environ.get("GRADAGG_BITS"):
        return dict(options, bits=DEFAULT_BITS)
    return dict(options)


class HookTraffic:
    """Bytes a hook's rank sent across nodes, and what float32 would have sent, over every call so far."""

    def __init__(self):
        self.bytes_sent = 0
        self.float_bytes = 0

    def _count(self, aggregator):
        stats = aggregator.stats
        self.bytes_sent += stats["inter_node_bytes_sent"]
        self.float_bytes += stats["inter_node_float_bytes"]

    def bits_per_element(self):
        """Bits this rank sent across nodes per gradient element, averaged over every call so far (None before
        anything crossed nodes, as on one node)."""
        return 32.0 * self.bytes_sent / self.float_bytes if self.float_bytes else None


def options_without_width(options):
    """A hook's options for its checkpoint's settings: the width is saved once, as it took effect (given, from
    GRADAGG_BITS or the default), not as it was asked for."""
    return {name: value for name, value in sorted(options.items()) if name != "bits"}


def checkpoint_residuals(aggregator):
    """An Aggregator's carried error as a checkpoint holds it (None without an Aggregator): export_residuals() with
    its arrays as tensors, which import_residuals() takes back."""
    if aggregator is None:
        return None
    residuals = aggregator.export_residuals()
    return dict(residuals, stripe=torch.from_numpy(residuals["stripe"]), own=torch.from_numpy(residuals["own"]))
