"""The DDP hook's state, GradaggState: its options, width and warm-up, one Aggregator and momentum buffer per DDP
bucket, its checkpoint, and the waiter thread that completes each bucket's future. The hook is ddp_hook.py."""
import math
import os
import queue
import threading
import weakref

import torch

import gradagg
from .common import (HookTraffic, checkpoint_residuals, hook_options, refuse_distributed_checkpoint, result_options,
                     same_settings, width_given)

# The DDP hook's default where no width is given (bits=, GRADAGG_BITS): AUTO_BITS in quantization buckets of
# AUTO_BUCKET elements (unless bucket_size= or GRADAGG_BUCKET says), behind an early phase at EARLY_BITS that
# gradagg.torch.AdamW ends once the ranks' gradients disagree enough (second_moment.py). On GPTs of 10.8M-85M parameters
# it ended within 1% of DDP at 1.42-1.58 bits per element (bench/results/gpt/).
AUTO_BITS = 1
EARLY_BITS = 2
AUTO_BUCKET = 256


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
        self._momentum_parts = {}  # bucket key -> (its momentum, cut_as it as the views lie): likewise
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
        self._parameters_complete = False  # the first step's last bucket came: every parameter of the model is known
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
        refuse_distributed_checkpoint("gradagg.torch.GradaggState")
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

    def load_state_dict(self, saved, residuals="restore"):
        """Resumes from state_dict() of this rank of an earlier run: call it before the first step. That step's
        buckets are aggregated as the saved run had them (DDP builds its first buckets afresh), so a run resumed from
        a checkpoint is bitwise the uninterrupted one. The settings must be the saved ones: bits, momentum, warm-up,
        and the options that change results as they take effect (given or GRADAGG_*: bucket size, error feedback,
        threshold, own stripe; the deadline, timing, trace, transport and pieces may differ). The number of ranks,
        nodes and ranks per node, and this rank's place, must be too (checked at that step): the carried error is
        owed per node and stripe. residuals="reset" loads another topology's checkpoint, as DeepSpeed does: the
        momentum and step counts are kept (the momentum is the same on every rank, so any rank's file serves), the
        carried error starts afresh; the run then is not bitwise the uninterrupted one."""
        refuse_distributed_checkpoint("gradagg.torch.GradaggState")
        if not isinstance(saved, dict) or saved.get("format") != 1:
            raise ValueError("gradagg.torch: load_state_dict takes what GradaggState.state_dict() returned")
        if residuals not in ("restore", "reset"):
            raise ValueError(f"gradagg.torch: residuals must be 'restore' or 'reset', not {residuals!r}")
        if not same_settings(saved["settings"], self._settings(), self.options):
            raise ValueError(f"gradagg.torch: the checkpoint's hook settings {saved['settings']} are not this "
                             f"GradaggState's {self._settings()} (the hook's default width and warm-up changed "
                             "once: a checkpoint of GradaggState() made before then resumes with bits=2)")
        if self.calls:
            raise ValueError("gradagg.torch: load_state_dict must come before the first step")
        if self.warmup == "auto":  # after how many steps the early phase ended (None: saved while it went on)
            self.early_steps = saved.get("early_steps")
        if residuals == "reset":
            saved = dict(saved, topology=None, buckets=[dict(b, residuals=None) for b in saved["buckets"]])
        if saved["buckets"]:  # a state saved before any step owes nothing
            self._restore = saved

    def _settings(self):
        return {"bits": self.bits, "momentum": self.momentum, "warmup_steps": self.warmup,
                "warmup_bits": self.warmup_bits, "result_options": result_options(self.options)}


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
