"""The DDP hook's check, at its first call, of the optimizers behind it: it refuses those that would train wrong on
what it returns."""
import gc
import weakref

import torch

from .adamw import AdamW

try:
    from torch.optim.optimizer import register_optimizer_step_pre_hook
except ImportError:  # PyTorch 1
    register_optimizer_step_pre_hook = None


def check_optimizers(state, parameters):
    """Once, at the hook's first call: the optimizers that step these parameters must suit what the hook returns.
    Raises ValueError for a momentum in both the hook and the optimizer, for a GradScaler in use beside the hook's
    momentum that the GradaggState was not given, and for torch's Adam family behind a hook that quantizes (the
    1-bit error feedback then meets Adam's per-coordinate scaling and the run does not train); gradagg.torch.Adam /
    AdamW are the pairing for Adam. gradagg's optimizers and a GradScaler passed as grad_scaler= introduce themselves.
    On PyTorch 2 every other optimizer is checked before its first step (a global step pre-hook), so no search is
    made for them; PyTorch 1 has no such hook, and there the heap is searched once, here. A GradScaler the state was
    not given can only be found on the heap: searched for here, where it matters (momentum in the hook, CUDA). The
    state counts as checked only once every check passed: a refusal the caller catches comes again at the next call."""
    scalers = tuple(c for c in (getattr(torch.amp, "GradScaler", None), getattr(torch.cuda.amp, "GradScaler", None))
                    if isinstance(c, type))
    scaler_search = (state.momentum > 0.0 and state.grad_scaler is None and bool(scalers) and
                     any(p.is_cuda for p in parameters))
    # One pass over the heap for what is searched, by each object's type: isinstance() would also read the
    # __class__ of objects it does not match, and torch.distributed's deprecated reduce_op warns when it is read.
    objects = []
    if scaler_search or register_optimizer_step_pre_hook is None:
        gc.collect()  # what is left of freed models (DDP's reference cycles) is not searched: only live objects
        objects = gc.get_objects()
    if scaler_search and any(issubclass(type(o), scalers) and o.is_enabled() for o in objects):
        raise ValueError("gradagg.torch: a GradScaler is in use and the hook carries momentum: pass it, "
                         "GradaggState(..., grad_scaler=scaler), so that the momentum follows the loss scale")
    if register_optimizer_step_pre_hook is not None:
        _check_before_first_step(state, register_optimizer_step_pre_hook)
        state.optimizers_checked = True
        return
    for optimizer in (o for o in objects if issubclass(type(o), torch.optim.Optimizer)):
        _check_optimizer(state, optimizer)
    state.optimizers_checked = True


def _check_before_first_step(state, register):
    """PyTorch 2: each optimizer is checked once, before its first step, against the parameters the hook has met."""
    owner = weakref.ref(state)
    checked = weakref.WeakSet()

    def before_step(optimizer, args, kwargs):
        current = owner()
        if current is None or optimizer in checked:  # a state gone keeps a hook that does nothing
            return
        _check_optimizer(current, optimizer)
        checked.add(optimizer)  # after the check: a refusal the caller catches comes again at the next step

    state._step_check = register(before_step)


# torch's optimizers that rescale each coordinate by a second moment, as Adam does.
_ADAM_FAMILY = tuple(getattr(torch.optim, name) for name in ("Adam", "AdamW", "NAdam", "RAdam", "Adamax")
                     if hasattr(torch.optim, name))


def _check_optimizer(state, optimizer):
    if isinstance(optimizer, AdamW):  # gradagg's own (Adam is one): paired with the hook by construction
        return
    if not any(id(p) in state._parameters for group in optimizer.param_groups for p in group["params"]):
        return
    name = type(optimizer).__name__
    # SGD's momentum, or the Adam family's beta1 (a first moment is a momentum).
    own_momentum = any(group.get("momentum", 0.0) or (group.get("betas") or (0.0,))[0]
                       for group in optimizer.param_groups)
    if state.momentum > 0.0 and own_momentum:
        raise ValueError(f"gradagg.torch: the hook carries momentum {state.momentum} and {name} has a momentum of "
                         "its own: the gradient would get momentum twice. Set the optimizer's momentum to 0.")
    if state.bits < 32 and isinstance(optimizer, _ADAM_FAMILY):
        raise ValueError(f"gradagg.torch: torch's {name} behind a {state.bits}-bit hook does not train (Adam "
                         "rescales each coordinate, and quantization error feedback then runs away). Use "
                         "gradagg.torch.AdamW / Adam with GradaggState(momentum=beta1), or bits=32.")
