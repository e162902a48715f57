"""The older path of gradagg.torch's Adam and AdamW (gradagg/torch/adamw.py, second_moment.py)."""
from gradagg.torch.adamw import Adam, AdamW, adam_step_bound  # noqa: F401 (this path's names)
from gradagg.torch.second_moment import synchronises  # noqa: F401 (this path's names)
