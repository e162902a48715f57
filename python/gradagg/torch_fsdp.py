"""The older path of gradagg.torch's FSDP2 hook (gradagg/torch/fsdp.py)."""
from gradagg.torch.fsdp import FSDPGradaggState  # noqa: F401 (this path's names)
