"""PyTorch's DistributedDataParallel with gradagg doing the gradient exchange: a communication hook.

    import gradagg.torch
    state = gradagg.torch.GradaggState(bits=1, momentum=0.9)
    model.register_comm_hook(state, gradagg.torch.comm_hook)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)   # momentum 0: the hook carries it (see below)

Launch with `mpirun -np N python3 train.py` (or srun, or another MPI's mpiexec) and initialise torch.distributed from
MPI (init_process_group_from_mpi) for DDP's own needs (the parameter broadcast); gradients go through gradagg.

Each DDP bucket gets its own gradagg Aggregator, so it keeps its own carried quantization error from step to step
(buckets differ in size, and DDP rebuilds them after the first iteration: a rebuilt bucket starts fresh), and each
parameter in a bucket is its own tensor to gradagg, with quantization buckets of its own. The hook
returns a torch.futures.Future of the bucket averaged over the ranks, as DDP expects: on CPUs complete once the
average is there; on GPUs once its last kernels are queued on the bucket's stream (a CUDA-aware future: DDP's wait
orders its own stream after them).

momentum > 0 applies heavy-ball momentum inside the aggregation (docs/DESIGN.md, "Momentum and Adam"): each rank hands
beta * m + g to gradagg, and the average that comes back is the new momentum m, the same on every rank, which the hook
returns in place of the gradient. Use the optimizer without momentum then. At 1 bit this is what trains as well as
float32; momentum applied after a 1-bit aggregation diverges.

warmup_steps=N sends each bucket's first N calls at warmup_bits (default 32: float32; a warm-up, as 1-bit Adam
has), then switches to the options' bit width with fresh carried error. full_precision_steps is the older name of
warmup_steps. warmup_steps="auto" (warmup_bits default 2) lasts until gradagg.torch.AdamW ends it (end_warmup), once
the ranks' gradients are noisy enough (gradagg/torch/adamw.py); behind another optimizer it never ends. Without a width
(bits=, GRADAGG_BITS) the hook runs its default: AUTO_BITS (1) in quantization buckets of AUTO_BUCKET (256) behind
warmup_steps="auto" at EARLY_BITS (2); with bits= it has no warm-up unless one is given, and warmup_steps=N without a
width keeps DEFAULT_BITS (2) after it. "auto" needs warmup_bits above the width.

With Adam or AdamW use gradagg.torch.AdamW / Adam (gradagg/torch/adamw.py): the hook carries Adam's first moment as its
momentum (momentum = beta1), and the optimizer averages each rank's own second moment over the ranks now and then
(or, behind a warm-up, freezes the one it learnt there, as 1-bit Adam does; see that module):

    state = gradagg.torch.GradaggState(momentum=0.9)   # the default width: 1 bit behind an automatic early phase
    model.register_comm_hook(state, gradagg.torch.comm_hook)
    optimizer = gradagg.torch.AdamW(model.parameters(), state, lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)

The hook refuses, at its first call, an optimizer that would silently train wrong on its output: one with a
momentum of its own beside the hook's (SGD's momentum, or the Adam family's beta1), and torch's Adam, AdamW, NAdam,
RAdam or Adamax behind a hook that quantizes below 32 bits.
state.bits_per_element() says what crossed the nodes so far, per gradient element, the warm-up included.

A bucket whose input holds a NaN or Inf (an AMP loss-scale overflow) comes back non-finite on every rank, so the
GradScaler skips the step; the momentum of every bucket is left as it was then (it is committed after the step's
last bucket). With AMP's GradScaler and momentum, pass GradaggState(..., grad_scaler=scaler): the gradients arrive
multiplied by the loss scale, and the momentum follows it when it changes (refused at the first step otherwise).
"""
import torch

import gradagg
from ..errors import UsageError
from . import ddp_bucket
from .ddp_resume import resume
from .optimizer_checks import check_optimizers


def comm_hook(state, bucket):
    """DDP communication hook: the bucket's gradients averaged over the ranks through gradagg."""
    buffer = bucket.buffer()
    # A bucket is its parameters in their order: DDP's rebuild after the first iteration may keep a bucket's index and
    # size but reorder what is inside.
    parameters = list(bucket.parameters())
    for parameter in parameters:
        if id(parameter) not in state._parameters:
            if state._parameters_complete:
                raise UsageError(
                    f"gradagg.torch.comm_hook (rank {gradagg.world()[0]}): a bucket holds a parameter that the "
                    "model's first step did not have: one GradaggState is registered on a second DDP model (give "
                    "each model a GradaggState of its own), or the model's parameters were replaced after its first "
                    "step")
            state._parameters[id(parameter)] = len(state._parameter_list)
            state._parameter_list.append(parameter)
    if bucket.is_last():
        state._parameters_complete = True
    if not state.optimizers_checked:
        check_optimizers(state, parameters)
    if state._restore is not None:
        future = ddp_bucket.future_of(buffer)
        state._stash.append((bucket, future))
        if bucket.is_last():
            resume(state)
        return future
    key = (bucket.index(), buffer.numel(), buffer.dtype, buffer.device, tuple(map(id, parameters)))
    aggregator = state.aggregator(key)
    momentum = state.momenta.get(key) if state.momentum > 0.0 else None
    if state.momentum > 0.0 and momentum is None:
        momentum = state.momenta[key] = torch.zeros_like(buffer)
        views = ddp_bucket.tensors_of(bucket, momentum)
        if len(views) == len(parameters):  # each parameter's momentum carries over from the bucket it was in
            for parameter, view in zip(parameters, views):
                carried = state.momentum_views.get(parameter)
                if carried is not None:
                    view.copy_(carried.reshape(-1))
                state.momentum_views[parameter] = view.view(parameter.shape)
    cached = state._views.get(key)
    if cached is None or cached[0].data_ptr() != buffer.data_ptr():  # the same storage: its views still hold
        cached = state._views[key] = (buffer, ddp_bucket.tensors_of(bucket))
    parts = None
    if momentum is not None:
        ddp_bucket.follow_loss_scale(state, key, momentum)
        parts = state._momentum_parts.get(key)
        if parts is None or parts[0] is not momentum:
            parts = state._momentum_parts[key] = (momentum, ddp_bucket.cut_as(momentum, cached[1]))
        parts = parts[1]
    last = bucket.is_last()
    pending, finish = ddp_bucket.start(state, aggregator, parameters, cached[1], momentum, buffer, last, parts)
    # What is left runs while the aggregation does.
    future = ddp_bucket.future_of(buffer)
    state._queue.put((aggregator, pending, finish, future, buffer))
    state._views_used.add(key)
    if last:  # a bucket DDP no longer has (its rebuild may make fewer) keeps no buffer alive
        for stale in state._views.keys() - state._views_used:
            del state._views[stale]
        state._views_used.clear()
    return future
