"""One DDP bucket under the hook: its gradients as one tensor per parameter, the heavy-ball momentum added before the
exchange and kept after the step's last bucket, and the future that DDP waits on."""
import contextlib

import torch


def tensors_of(bucket, buffer=None):
    """The bucket's flat buffer (or `buffer`, laid out as it) as views, one per parameter, so that each gets
    quantization buckets of its own (a small bias never shares statistics with a large weight); the whole buffer
    where the sizes do not add up."""
    buffer = bucket.buffer() if buffer is None else buffer
    sizes = [parameter.numel() for parameter in bucket.parameters()]
    return list(buffer.split(sizes)) if sizes and sum(sizes) == buffer.numel() else [buffer]


def future_of(buffer):
    """The future the hook returns for `buffer`. On a GPU it is CUDA-aware: it completes once the bucket's last
    kernels are queued, and DDP's wait() orders its stream after them instead of the host waiting for the GPU."""
    return torch.futures.Future(devices=[buffer.device]) if buffer.is_cuda else torch.futures.Future()


def follow_loss_scale(state, key, momentum):
    """With a GradScaler, the gradients arrive multiplied by its scale, and so does the momentum the hook keeps; when
    the scale changed since the bucket's last step (halved after an overflow, doubled after a run of good steps), the
    momentum is brought to the new one (a factor of a power of two: exact)."""
    scale = state.loss_scale(momentum.device)
    if scale is None:
        return
    stored = state.momentum_scales.get(key)
    if stored is None:
        state.momentum_scales[key] = scale.clone()
        return
    momentum.mul_((scale / stored).to(momentum.dtype))
    stored.copy_(scale)


def cut_as(momentum, tensors):
    """`momentum` cut as `tensors` lie end to end (one view per tensor)."""
    return list(momentum.split([t.numel() for t in tensors])) if len(tensors) > 1 else [momentum]


def start(state, aggregator, parameters, gradients, momentum, buffer=None, last=True, momentum_parts=None):
    """Starts one bucket's aggregation: `gradients`, one flat tensor per parameter of `parameters` (views of `buffer`,
    their contiguous whole, where they lie in one), and its momentum, a contiguous tensor laid out as they are (or
    None). The observers see this rank's gradients first. Returns the Pending and what finishes the bucket once it is
    done: queues the average over the ranks, and, after the step's `last` bucket, the new momentum of every bucket of
    the step, unless one of them overflowed, then calls its argument (if any) on the same stream, with no wait for the
    GPU: a CUDA-aware future completed there orders its waiters after that work. `momentum_parts`: the momentum cut
    as the gradients (made here without it). The finish's `stream` is that stream (None on CPUs); its caller may make
    it current first and say so (on_stream=True), as the hook's waiter thread does once for many buckets."""
    if state.observers:
        if len(gradients) != len(parameters):
            raise ValueError("gradagg.torch: a DDP bucket's gradients are not laid out per parameter, so "
                             "gradagg.torch.AdamW cannot keep each rank's second moment")
        for observe in state.observers:
            observe(parameters, gradients, state.loss_scale(gradients[0].device))
    if momentum is not None:  # beta * m + g: the sum over ranks is size * (beta m + mean g)
        # Per parameter, as a resumed run's first step must do it too (its buckets are not DDP's).
        parts = cut_as(momentum, gradients) if momentum_parts is None else momentum_parts
        torch._foreach_add_(gradients, parts, alpha=state.momentum)
    stream = torch.cuda.current_stream(gradients[0].device) if gradients[0].is_cuda else None
    pending = aggregator.aggregate_async(gradients, stream=stream.cuda_stream if stream is not None else None)
    size = state.world_size
    results = [buffer] if buffer is not None else gradients  # the bucket whole where it lies in one buffer

    def finish(then=None, on_stream=False):
        with torch.cuda.stream(stream) if stream is not None and not on_stream else contextlib.nullcontext():
            torch._foreach_div_(results, size)
            if momentum is not None:
                finite = (torch.isfinite(results[0]).all() if len(results) == 1
                          else torch.stack([torch.isfinite(r).all() for r in results]).all())
                _commit_momentum(state, results, momentum, finite, last)
            if then is not None:
                then()

    finish.stream = stream
    return pending, finish


def _commit_momentum(state, results, momentum, finite, last):
    """Keeps a bucket's result (`results`, laid out as `momentum`) as its new momentum once the step's last bucket is
    in, and only if every bucket of the step came back finite: AMP's GradScaler skips a step with a NaN or Inf in
    any gradient, and the momentum must skip it too. Decided on the device, no wait; division and selection are
    exact, so the buffer whole and in parts give the same bits."""
    state._step_finite = finite if state._step_finite is None else state._step_finite & finite
    state._step_momenta.append((results, momentum))
    if not last:
        return
    for results, momentum in state._step_momenta:
        for result, part in zip(results, cut_as(momentum, results)):
            torch.where(state._step_finite, result, part, out=part)
    state._step_finite, state._step_momenta = None, []
