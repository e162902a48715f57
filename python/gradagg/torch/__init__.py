"""gradagg under PyTorch: DDP's communication hook, Adam and AdamW paired with it, FSDP2's hook and local steps across
nodes. A thin front; each room is a module of its own:

  ddp_hook          comm_hook and its usage (start here)          ddp_state      GradaggState, the hook's state
  ddp_bucket        one bucket's exchange and momentum            ddp_resume     the first step after a checkpoint
  optimizer_checks  the optimizers the hook refuses               process_group  torch.distributed from MPI
  adamw             Adam and AdamW on the hook's momentum         second_moment  where their v comes from
  step_guard        their guard against a run off its path        fsdp           FSDP2's hook (FSDPGradaggState)
  local_steps       DiLoCo-style outer steps (LocalSteps)         common         what the hooks share

    state = gradagg.torch.GradaggState(momentum=0.9)
    model.register_comm_hook(state, gradagg.torch.comm_hook)
    optimizer = gradagg.torch.AdamW(model.parameters(), state, lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)

gradagg.torch_adam, gradagg.torch_fsdp and gradagg.torch_local_steps, the older paths, still import.
"""
from .adamw import Adam, AdamW
from .common import DEFAULT_BITS  # noqa: F401 (gradagg.torch's, outside __all__)
from .ddp_bucket import tensors_of
from .ddp_hook import comm_hook
from .ddp_state import AUTO_BITS, AUTO_BUCKET, EARLY_BITS, GradaggState  # noqa: F401 (gradagg.torch's, outside __all__)
from .fsdp import FSDPGradaggState  # noqa: F401 (gradagg.torch's, outside __all__)
from .local_steps import LocalSteps, NesterovInside
from .optimizer_checks import check_optimizers  # noqa: F401 (gradagg.torch's, outside __all__)
from .process_group import init_process_group_from_mpi

__all__ = ["Adam", "AdamW", "GradaggState", "LocalSteps", "NesterovInside", "comm_hook", "init_process_group_from_mpi",
           "tensors_of"]
