"""PyTorch's DistributedDataParallel with gradagg doing the gradient exchange: a communication hook.

    import gradagg.torch
    state = gradagg.torch.GradaggState(bits=1, momentum=0.9)
    model.register_comm_hook(state, gradagg.torch.comm_hook)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)   # momentum 0: the hook carries it (see below)

Launch with `mpirun -np N python3 train.py` (or srun, or another MPI's mpiexec) and initialise torch.distributed from MPI
(init_process_group_from_mpi) for DDP's own needs (the parameter broadcast); gradients go through gradagg.

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
the ranks' gradients are noisy enough (gradagg/torch_adam.py); behind another optimizer it never ends. Without a width
(bits=, GRADAGG_BITS) the hook runs its default: AUTO_BITS (1) in quantization buckets of AUTO_BUCKET (256) behind
warmup_steps="auto" at EARLY_BITS (2); with bits= it has no warm-up unless one is given, and warmup_steps=N without a
width keeps DEFAULT_BITS (2) after it. "auto" needs warmup_bits above the width.

With Adam or AdamW use gradagg.torch.AdamW / Adam (gradagg/torch_adam.py): the hook carries Adam's first moment as its
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
import contextlib
import gc
import math
import os
import queue
import threading
import weakref

import torch
import torch.distributed as dist

import gradagg
from gradagg.hook_common import DEFAULT_BITS  # noqa: F401 (gradagg.torch.DEFAULT_BITS: FSDP2's hook's width)
from gradagg.hook_common import HookTraffic, checkpoint_residuals, hook_options, options_without_width, width_given

# The DDP hook's default where no width is given (bits=, GRADAGG_BITS): AUTO_BITS in quantization buckets of
# AUTO_BUCKET elements (unless bucket_size= or GRADAGG_BUCKET says), behind an early phase at EARLY_BITS that
# gradagg.torch.AdamW ends once the ranks' gradients disagree enough (torch_adam.py). On GPTs of 10.8M-85M parameters
# it ended within 1% of DDP at 1.42-1.58 bits per element (bench/results/gpt/).
AUTO_BITS = 1
EARLY_BITS = 2
AUTO_BUCKET = 256

__all__ = ["Adam", "AdamW", "GradaggState", "LocalSteps", "NesterovInside", "comm_hook", "init_process_group_from_mpi", "tensors_of"]


def init_process_group_from_mpi(backend=None, port=29500):
    """torch.distributed.init_process_group with MPI's own rank and size in MPI_COMM_WORLD (whatever launched the
    ranks: mpirun, srun, mpiexec); rank 0's host is MASTER_ADDR where set, else found through mpi4py. backend: 'nccl'
    where CUDA is available, else 'gloo'."""
    rank, size = gradagg.world()
    if "MASTER_ADDR" not in os.environ:
        try:
            from mpi4py import MPI  # noqa: F401 (only for the address exchange)
        except ImportError:
            raise gradagg.UsageError(f"gradagg.torch.init_process_group_from_mpi: rank {rank}: set MASTER_ADDR to rank "
                                     "0's host name or address (or install mpi4py, which finds it)") from None
        import socket
        os.environ["MASTER_ADDR"] = MPI.COMM_WORLD.bcast(socket.gethostname() if rank == 0 else None, root=0)
    os.environ.setdefault("MASTER_PORT", str(port))
    backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    dist.init_process_group(backend, rank=rank, world_size=size)


class GradaggState(HookTraffic):
    """The hook's state: gradagg options (keyword arguments, as gradagg.Aggregator takes them; without a width, the
    default above), the momentum, the warm-up, and one Aggregator and momentum buffer per DDP bucket."""

    def __init__(self, momentum=0.0, comm=None, full_precision_steps=0, warmup_steps=None, warmup_bits=None,
                 check_optimizers=True, grad_scaler=None, **options):
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"gradagg.torch: momentum must be in [0, 1), not {momentum}")
        if full_precision_steps and warmup_steps:
            raise ValueError("gradagg.torch: give warmup_steps or its older name full_precision_steps, not both")
        default_width = not width_given(options)
        if full_precision_steps:
            warmup_steps = full_precision_steps
        elif warmup_steps is None:
            warmup_steps = "auto" if default_width else 0
        if warmup_steps != "auto" and (isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int)
                                       or warmup_steps < 0):
            raise ValueError(f"gradagg.torch: warmup_steps must be 'auto' or a whole number >= 0, not "
                             f"{warmup_steps!r}")
        if warmup_bits is None:
            warmup_bits = EARLY_BITS if warmup_steps == "auto" else 32
        if warmup_bits not in (1, 2, 4, 8, 32):
            raise ValueError(f"gradagg.torch: warmup_bits must be 1, 2, 4, 8 or 32, not {warmup_bits}")
        if warmup_steps == "auto" and default_width:  # the default: AUTO_BITS behind the early phase
            options = dict(options, bits=AUTO_BITS)
            if "bucket_size" not in options and not os.environ.get("GRADAGG_BUCKET"):
                options["bucket_size"] = AUTO_BUCKET
        self.momentum = momentum
        self.comm = comm
        self.grad_scaler = grad_scaler  # AMP's loss scaler, whose scale the momentum must follow
        self.momentum_scales = {}  # bucket key -> the loss scale its momentum is in (a device scalar), with a scaler
        self._step_finite = None  # this step's buckets so far all came back finite (a device bool)
        self._step_momenta = []  # (result, momentum) of this step's buckets, committed after its last one
        # "auto": the early phase lasts until end_warmup() (gradagg.torch.AdamW's call; early_steps then says after
        # how many steps). Without such an optimizer it never ends: the hook stays at warmup_bits.
        self.warmup = warmup_steps
        self.warmup_steps = math.inf if warmup_steps == "auto" else warmup_steps
        self.warmup_bits = warmup_bits
        self.early_steps = None
        super().__init__()
        options = hook_options(options)
        self.bits = gradagg.options.make_options(options).bits  # the library's rule: defaults, GRADAGG_*, these
        if warmup_steps == "auto" and not self.bits < warmup_bits:
            raise ValueError(f"gradagg.torch: warmup_steps='auto' sends warmup_bits ({warmup_bits}) until the "
                             f"optimizer goes to the width, which must be fewer bits: the width is {self.bits}")
        self.options = options
        self.aggregators = {}
        self.momenta = {}
        self.momentum_views = {}  # parameter -> its slice of its bucket's momentum
        self._views = {}  # bucket key -> (its buffer, tensors_of it): split once, not at every call
        self._momentum_parts = {}  # bucket key -> (its momentum, _parts of it as the views lie): likewise
        self._views_used = set()  # the keys of this step's buckets so far: the others' views go after its last one
        self.calls = {}
        self.keys = {}  # bucket index -> the key of the bucket now at that index
        self.world_size = None
        self.optimizers_checked = not check_optimizers  # False: trust the caller (to measure a wrong pairing)
        self._step_check = None  # PyTorch 2: the optimizer step pre-hook that checks each optimizer once
        # Called with (parameters, this rank's own gradients, the loss scale or None) before a bucket is sent:
        # gradagg.torch.AdamW keeps each rank's second moment from them.
        self.observers = []
        self._parameters = {}  # id(parameter) -> its index in the order the hook first met it: a checkpoint's names
        self._parameter_list = []
        self._restore = None  # load_state_dict's, put in place at the first iteration after it
        self._stash = []  # that iteration's (bucket, future), until its last bucket
        # The waiter thread holds the state only weakly, so that a state nothing uses any more (its model gone) is
        # freed, with its momentum buffers and GradScaler: a live scaler on the heap would make the next state's
        # momentum hook refuse to start without it.
        self._queue = queue.SimpleQueue()
        self._waiter = threading.Thread(target=_complete, args=(self._queue, weakref.ref(self)), daemon=True,
                                        name="gradagg-hook")
        self._waiter.start()
        weakref.finalize(self, _state_freed, self._queue, self.aggregators).atexit = False

    def loss_scale(self, device):
        """The GradScaler's scale as a scalar on `device`, or None without one in use: the units the hook's momentum
        is in."""
        scaler = self.grad_scaler
        if scaler is None or not scaler.is_enabled():
            return None
        scale = getattr(scaler, "_scale", None)
        return (scale if scale is not None else torch.tensor(scaler.get_scale())).to(device, torch.float32)

    @property
    def full_precision_steps(self):  # the older name
        return self.warmup_steps

    def _early(self, calls):
        """Whether a bucket's call number `calls` goes at warmup_bits."""
        return self.early_steps is None if self.warmup == "auto" else calls <= self.warmup_steps

    def in_warmup(self):
        """Whether the next step's calls still go at warmup_bits."""
        calls = (self._restore or {}).get("calls") or self.calls  # a loaded checkpoint's, before its first step
        return self._early(max(calls.values(), default=0) + 1)

    def end_warmup(self):
        """Ends an automatic ("auto") early phase after the steps made so far: every bucket's next call goes at the
        hook's width, with fresh carried error. Called between steps, after the same step on every rank
        (gradagg.torch.AdamW decides from values identical on every rank). Returns the steps the phase took."""
        if self.warmup != "auto":
            raise ValueError(f"gradagg.torch: end_warmup() ends an automatic early phase (warmup_steps='auto'); this "
                             f"hook's warmup_steps is {self.warmup!r}")
        if self.early_steps is None:
            self.early_steps = max(self.calls.values(), default=0)
        return self.early_steps

    def momentum_of(self, parameter):
        """The hook's momentum for `parameter` (a view of its bucket's), or None: what the next step adds to."""
        return self.momentum_views.get(parameter)

    def aggregator(self, key):
        """The bucket's Aggregator for this call: warmup_bits for its first warmup_steps calls (with "auto", until
        end_warmup()), then the options' (whose carried error starts fresh there). Calls are counted per bucket
        index, so DDP's rebuild of its buckets after the first iteration does not restart the warm-up."""
        index = key[0]
        calls = self.calls[index] = self.calls.get(index, 0) + 1
        if self.keys.get(index, key) != key:
            self._retire(self.keys[index])
        self.keys[index] = key
        if self._early(calls):
            key, options = key + ("warmup",), dict(self.options, bits=self.warmup_bits)
        else:
            options = self.options
            # The warm-up is over: its Aggregator is closed now, in step on every rank, not whenever it is collected.
            warmup = self.aggregators.pop(key + ("warmup",), None)
            if warmup is not None:
                warmup.close()
        if key not in self.aggregators:  # collective: DDP hands buckets over in the same order on every rank
            self.aggregators[key] = gradagg.Aggregator(comm=self.comm, **options)
            self.world_size = self.aggregators[key].size
        return self.aggregators[key]

    def _retire(self, old):
        """A rebuilt bucket (the same index, other parameters or another order) replaces the old one, keyed `old`,
        at once on every rank: its Aggregators are closed, in the same order everywhere, and its momentum buffer
        dropped (comm_hook carries each parameter's momentum over first)."""
        for key in (old, old + ("warmup",)):
            aggregator = self.aggregators.pop(key, None)
            if aggregator is not None:
                aggregator.close()
        self.momenta.pop(old, None)
        self._momentum_parts.pop(old, None)

    def state_dict(self):
        """What the hook owes between steps, for torch.save beside the model and optimizer (each rank saves its own):
        every bucket's carried quantization error (in its Aggregator's layout), momentum and call count, and the
        bytes sent. Call it between steps (after optimizer.step())."""
        live = next(iter(self.aggregators.values()), None)
        buckets = []
        for index, key in sorted(self.keys.items()):
            kind = "warmup" if key + ("warmup",) in self.aggregators else "main" if key in self.aggregators else None
            aggregator = self.aggregators.get(key + ("warmup",) if kind == "warmup" else key)
            residuals = checkpoint_residuals(aggregator)
            momentum, scale = self.momenta.get(key), self.momentum_scales.get(key)
            buckets.append({"index": index, "parameters": [self._parameters[i] for i in key[4]], "aggregator": kind,
                            "residuals": residuals, "momentum": None if momentum is None else momentum.cpu().clone(),
                            "momentum_scale": None if scale is None else float(scale)})
        return {"format": 1, "settings": self._settings(),
                "topology": None if live is None else [live.rank, live.size, live.nodes, live.ranks_per_node],
                "parameters": [p.numel() for p in self._parameter_list], "calls": dict(self.calls),
                "buckets": buckets, "bytes_sent": self.bytes_sent, "float_bytes": self.float_bytes,
                "early_steps": self.early_steps}

    def load_state_dict(self, saved):
        """Resumes from state_dict() of this rank of an earlier run: call it before the first step. That step's
        buckets are aggregated as the saved run had them (DDP builds its first buckets afresh), so a run resumed from
        a checkpoint is bitwise the uninterrupted one. The settings (bits, momentum, warm-up) must be the saved ones;
        the number of ranks, nodes and ranks per node, and this rank's place, must be too (checked at that step): the
        carried error is owed per node and stripe, so it has no meaning in another topology."""
        if not isinstance(saved, dict) or saved.get("format") != 1:
            raise ValueError("gradagg.torch: load_state_dict takes what GradaggState.state_dict() returned")
        if saved["settings"] != self._settings():
            raise ValueError(f"gradagg.torch: the checkpoint's hook settings {saved['settings']} are not this "
                             f"GradaggState's {self._settings()} (the hook's default width and warm-up changed "
                             "once: a checkpoint of GradaggState() made before then resumes with bits=2)")
        if self.calls:
            raise ValueError("gradagg.torch: load_state_dict must come before the first step")
        if self.warmup == "auto":  # after how many steps the early phase ended (None: saved while it went on)
            self.early_steps = saved.get("early_steps")
        if saved["buckets"]:  # a state saved before any step owes nothing
            self._restore = saved

    def _settings(self):
        return {"bits": self.bits, "momentum": self.momentum, "warmup_steps": self.warmup,
                "warmup_bits": self.warmup_bits, "options": options_without_width(self.options)}


def _complete(waiting, owner):
    """A GradaggState's waiter thread: completes each bucket's future, in the order the hook queued them, once its
    aggregation is done. `owner`: a weak reference to the state; between buckets the thread holds nothing of it."""
    current = None  # (device, stream) this thread last made current: the buckets' finishes run on it
    while True:
        item = waiting.get()
        if item is None:
            return
        current = _complete_bucket(item, owner(), current)
        del item


def _complete_bucket(item, state, current):
    """Waits for one bucket's aggregation, counts its bytes and runs its finish with the bucket's stream current;
    returns the stream now current. An item holds its state (the finish refers to it), so `state` is never None."""
    aggregator, pending, finish, future, value = item
    try:
        pending.wait()
        state._count(aggregator)
        # Compared as numbers: torch's Stream compares unequal to nothing, None included (torch 2.11).
        stream = finish.stream
        if stream is not None and (stream.device_index, stream.cuda_stream) != current:
            torch.cuda.set_stream(stream)
            current = (stream.device_index, stream.cuda_stream)
        finish(lambda: future.set_result(value), on_stream=True)
    except Exception as error:  # the training step sees it when it waits on the future
        future.set_exception(error)
    return current


def _state_freed(waiting, aggregators):
    """A GradaggState freed: its waiter thread ends, and its Aggregators stay open until gradagg closes every one at
    exit in the same order on every rank (closing may wait for the node's other ranks), not whenever each rank's
    garbage collector comes to them."""
    gradagg.lifecycle.keep_until_exit(aggregators.values())
    waiting.put(None)


def tensors_of(bucket, buffer=None):
    """The bucket's flat buffer (or `buffer`, laid out as it) as views, one per parameter, so that each gets
    quantization buckets of its own (a small bias never shares statistics with a large weight); the whole buffer
    where the sizes do not add up."""
    buffer = bucket.buffer() if buffer is None else buffer
    sizes = [parameter.numel() for parameter in bucket.parameters()]
    return list(buffer.split(sizes)) if sizes and sum(sizes) == buffer.numel() else [buffer]


def comm_hook(state, bucket):
    """DDP communication hook: the bucket's gradients averaged over the ranks through gradagg."""
    buffer = bucket.buffer()
    # A bucket is its parameters in their order: DDP's rebuild after the first iteration may keep a bucket's index and
    # size but reorder what is inside.
    parameters = list(bucket.parameters())
    for parameter in parameters:
        if id(parameter) not in state._parameters:
            state._parameters[id(parameter)] = len(state._parameter_list)
            state._parameter_list.append(parameter)
    if not state.optimizers_checked:
        check_optimizers(state, parameters)
    if state._restore is not None:
        future = _future(buffer)
        state._stash.append((bucket, future))
        if bucket.is_last():
            _resume(state)
        return future
    key = (bucket.index(), buffer.numel(), buffer.dtype, buffer.device, tuple(map(id, parameters)))
    aggregator = state.aggregator(key)
    momentum = state.momenta.get(key) if state.momentum > 0.0 else None
    if state.momentum > 0.0 and momentum is None:
        momentum = state.momenta[key] = torch.zeros_like(buffer)
        views = tensors_of(bucket, momentum)
        if len(views) == len(parameters):  # each parameter's momentum carries over from the bucket it was in
            for parameter, view in zip(parameters, views):
                carried = state.momentum_views.get(parameter)
                if carried is not None:
                    view.copy_(carried.reshape(-1))
                state.momentum_views[parameter] = view.view(parameter.shape)
    cached = state._views.get(key)
    if cached is None or cached[0].data_ptr() != buffer.data_ptr():  # the same storage: its views still hold
        cached = state._views[key] = (buffer, tensors_of(bucket))
    parts = None
    if momentum is not None:
        _follow_loss_scale(state, key, momentum)
        parts = state._momentum_parts.get(key)
        if parts is None or parts[0] is not momentum:
            parts = state._momentum_parts[key] = (momentum, _parts(momentum, cached[1]))
        parts = parts[1]
    last = bucket.is_last()
    pending, finish = _start(state, aggregator, parameters, cached[1], momentum, buffer, last, parts)
    # What is left runs while the aggregation does.
    future = _future(buffer)
    state._queue.put((aggregator, pending, finish, future, buffer))
    state._views_used.add(key)
    if last:  # a bucket DDP no longer has (its rebuild may make fewer) keeps no buffer alive
        for stale in state._views.keys() - state._views_used:
            del state._views[stale]
        state._views_used.clear()
    return future


def _future(buffer):
    """The future the hook returns for `buffer`. On a GPU it is CUDA-aware: it completes once the bucket's last
    kernels are queued, and DDP's wait() orders its stream after them instead of the host waiting for the GPU."""
    return torch.futures.Future(devices=[buffer.device]) if buffer.is_cuda else torch.futures.Future()


def _follow_loss_scale(state, key, momentum):
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


def _parts(momentum, tensors):
    """`momentum` cut as `tensors` lie end to end (one view per tensor)."""
    return list(momentum.split([t.numel() for t in tensors])) if len(tensors) > 1 else [momentum]


def _start(state, aggregator, parameters, gradients, momentum, buffer=None, last=True, momentum_parts=None):
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
        parts = _parts(momentum, gradients) if momentum_parts is None else momentum_parts
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
        for result, part in zip(results, _parts(momentum, results)):
            torch.where(state._step_finite, result, part, out=part)
    state._step_finite, state._step_momenta = None, []


def _resume(state):
    """The first iteration after load_state_dict, at its last bucket: DDP's buckets are its first ones, not the
    saved run's (rebuilt after its first iteration), so each saved bucket is aggregated on its parameters' gradients
    wherever they lie now, by an Aggregator that takes over the saved one's residuals, in the saved order. From the
    next iteration DDP's rebuilt buckets are those again."""
    saved, stash = state._restore, state._stash
    state._restore, state._stash = None, []
    gradients = {}
    for bucket, _ in stash:
        parameters = list(bucket.parameters())
        views = tensors_of(bucket)
        if len(views) != len(parameters):
            raise ValueError("gradagg.torch: cannot resume: a DDP bucket's gradients are not laid out per parameter")
        gradients.update(zip(map(id, parameters), views))
    sizes = [p.numel() for p in state._parameter_list]
    if sizes != saved["parameters"]:
        raise ValueError(f"gradagg.torch: the checkpoint is of a model of {len(saved['parameters'])} parameters "
                         f"({sum(saved['parameters'])} elements), not this one's {len(sizes)} ({sum(sizes)})")
    state.calls = {int(index): calls for index, calls in saved["calls"].items()}
    state.bytes_sent, state.float_bytes = saved["bytes_sent"], saved["float_bytes"]
    for entry in saved["buckets"]:
        parameters = [state._parameter_list[i] for i in entry["parameters"]]
        views = [gradients[id(p)] for p in parameters]
        key = (entry["index"], sum(v.numel() for v in views), views[0].dtype, views[0].device,
               tuple(map(id, parameters)))
        aggregator = state.aggregator(key)
        topology = [aggregator.rank, aggregator.size, aggregator.nodes, aggregator.ranks_per_node]
        if saved["topology"] is not None and topology != saved["topology"]:
            raise ValueError(f"gradagg.torch: the checkpoint was saved by rank {saved['topology'][0]} of "
                             f"{saved['topology'][1]} ({saved['topology'][2]} node(s) of {saved['topology'][3]}); this "
                             f"is rank {topology[0]} of {topology[1]} ({topology[2]} node(s) of {topology[3]}). The "
                             "carried error belongs to one place in one topology: resume on the same one.")
        warmup = state._early(state.calls[entry["index"]])
        if entry["residuals"] is not None and entry["aggregator"] == ("warmup" if warmup else "main"):
            aggregator.import_residuals({name: value.numpy() if torch.is_tensor(value) else value
                                         for name, value in entry["residuals"].items()})
        momentum = None
        if state.momentum > 0.0:
            momentum = (torch.zeros(key[1], dtype=key[2], device=key[3]) if entry["momentum"] is None
                        else entry["momentum"].to(device=key[3], dtype=key[2]).contiguous())
            state.momenta[key] = momentum
            if entry.get("momentum_scale") is not None:
                state.momentum_scales[key] = torch.tensor(entry["momentum_scale"], device=key[3])
            for parameter, view in zip(parameters, _parts(momentum, views)):
                state.momentum_views[parameter] = view.view(parameter.shape)
        if momentum is not None:
            _follow_loss_scale(state, key, momentum)
        pending, finish = _start(state, aggregator, parameters, views, momentum, last=entry is saved["buckets"][-1])
        pending.wait()  # one call at a time, in the saved order: this step only
        state._count(aggregator)
        finish()
    for bucket, future in stash:
        future.set_result(bucket.buffer())


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
    try:
        from torch.optim.optimizer import register_optimizer_step_pre_hook as register
    except ImportError:  # PyTorch 1
        register = None
    scalers = tuple(c for c in (getattr(torch.amp, "GradScaler", None), getattr(torch.cuda.amp, "GradScaler", None))
                    if isinstance(c, type))
    scaler_search = (state.momentum > 0.0 and state.grad_scaler is None and bool(scalers) and
                     any(p.is_cuda for p in parameters))
    # One pass over the heap for what is searched, by each object's type: isinstance() would also read the
    # __class__ of objects it does not match, and torch.distributed's deprecated reduce_op warns when it is read.
    objects = []
    if scaler_search or register is None:
        gc.collect()  # what is left of freed models (DDP's reference cycles) is not searched: only live objects
        objects = gc.get_objects()
    if scaler_search and any(issubclass(type(o), scalers) and o.is_enabled() for o in objects):
        raise ValueError("gradagg.torch: a GradScaler is in use and the hook carries momentum: pass it, "
                         "GradaggState(..., grad_scaler=scaler), so that the momentum follows the loss scale")
    if register is not None:
        _check_before_first_step(state, register)
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


from gradagg.torch_adam import Adam, AdamW  # noqa: E402 (they take a GradaggState from above)
from gradagg.torch_fsdp import FSDPGradaggState  # noqa: E402,F401 (FSDP2's all-reduce hook)
from gradagg.torch_local_steps import LocalSteps, NesterovInside  # noqa: E402,F401 (local steps, DiLoCo-style)
