"""The older path of gradagg.torch's local steps across nodes (gradagg/torch/local_steps.py)."""
from gradagg.torch.local_steps import (  # noqa: F401 (this path's names)
    DEFAULT_BITS, FORMAT, OUTER_LR, OUTER_MOMENTUM, LocalSteps, NesterovInside, nesterov, split_fragments)
