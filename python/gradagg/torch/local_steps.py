"""Local steps across nodes (DiLoCo's outer loop on gradagg's hierarchy): inside a node the ranks train in step every
step (DDP over the node's ranks), and only every `sync_every` steps does anything cross the nodes: the change of the
parameters since the last synchronisation (the outer gradient), averaged over the nodes at 4 bits with error
feedback, then an outer optimizer step on the shared anchor, which every rank takes as its parameters.

    gradagg.torch.init_process_group_from_mpi()
    local = gradagg.torch.LocalSteps(model, sync_every=64)            # 4 bits; Nesterov SGD, lr 0.7, momentum 0.9
    ddp = DistributedDataParallel(model, process_group=local.node_group)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)        # the inner optimizer: any
    for inputs, targets in batches:
        loss_fn(ddp(inputs), targets).backward()
        optimizer.step()
        optimizer.zero_grad()
        local.step()                                                  # every step, after the inner optimizer's

The outer step of a fragment (docs/local-steps.md): delta = anchor - parameters, in float32, handed to a gradagg
Aggregator by the node's local rank 0 (zeros from its other ranks, so the node's sum is that rank's delta exactly);
the sum over the nodes, times 1 / nodes, is the anchor's gradient for the outer optimizer; then every rank copies the
new anchor into its parameters. The result of an Aggregator is bitwise the same on every rank, and so is the anchor.
The Aggregator carries the quantization error of its stripe from one outer step to the next (per node and stripe).

fragments=F (Streaming DiLoCo) cuts the parameters into F runs of consecutive parameters of about equal size; fragment
f synchronises at steps f * (sync_every // F) + k * sync_every, so the link carries one fragment at a time. delay=D
runs each exchange in the background for D inner steps and applies it at the D-th step after it began (at most
sync_every // F, so that one exchange is in flight at a time); the fragment's parameters then take the new anchor,
or (1 - mix) * anchor + mix * parameters with mix > 0 (the inner steps made meanwhile partly kept; the nodes then
differ in that fragment until its next synchronisation). delay=0 (the default) synchronises at once.
"""
import math

import torch
import torch.distributed as dist

import gradagg
from gradagg import lifecycle
from gradagg.errors import UsageError
from .common import HookTraffic, checkpoint_residuals, refuse_distributed_checkpoint, width_given

# DiLoCo's outer optimizer (Douillard et al., 2023): Nesterov SGD at lr 0.7, momentum 0.9, constant.
OUTER_LR = 0.7
OUTER_MOMENTUM = 0.9
# The outer gradient's width where neither bits= nor GRADAGG_BITS gives one: on the 85M GPT over 4 nodes at H = 64,
# 4 bits ended within 0.34% of float32 DiLoCo on a tuning seed and 0.29% below it on a held-out one; 2 bits 1.6-1.7%
# and 1 bit 5.4-6.0% behind (bench/results/local_steps/).
DEFAULT_BITS = 4
FORMAT = 1  # of state_dict()


def nesterov(parameters):
    """The default outer optimizer over `parameters` (a fragment's anchor)."""
    return torch.optim.SGD(parameters, lr=OUTER_LR, momentum=OUTER_MOMENTUM, nesterov=True)


class NesterovInside:
    """An outer Nesterov SGD whose momentum travels inside the exchange, as the DDP hook carries the inner one
    (docs/DESIGN.md, "Momentum and Adam"): each node hands momentum * v + delta, the average that comes back is the
    new momentum v' (the same on every rank), and the anchor steps by lr * ((1 + momentum) * v' - momentum * v), which
    is torch's Nesterov step written with v' = momentum * v + g. The quantization error then falls on the momentum,
    and error feedback pays it back there. Pass an instance as LocalSteps' outer_optimizer."""

    def __init__(self, lr=OUTER_LR, momentum=OUTER_MOMENTUM):
        if not lr > 0 or not 0 <= momentum < 1:
            raise UsageError(f"gradagg.torch.NesterovInside: lr must be > 0 and momentum in [0, 1), not {lr}, "
                             f"{momentum}")
        self.lr, self.momentum = lr, momentum

    def __call__(self, anchor):
        return _MomentumInside(anchor, self.lr, self.momentum)


class _MomentumInside:
    """NesterovInside's state over one fragment's anchor: its momentum, in float32."""

    def __init__(self, anchor, lr, momentum):
        self.anchor, self.lr, self.momentum = anchor, lr, momentum
        self.velocity = [torch.zeros_like(a) for a in anchor]

    def before_exchange(self, deltas):
        """Local rank 0's input: momentum * v + delta."""
        for delta, velocity in zip(deltas, self.velocity):
            delta.add_(velocity, alpha=self.momentum)

    def step(self):
        """The anchors' .grad hold v', the average over the nodes."""
        for anchor, velocity in zip(self.anchor, self.velocity):
            new = anchor.grad
            anchor.sub_(new * (1.0 + self.momentum) - velocity * self.momentum, alpha=self.lr)
            velocity.copy_(new)

    def state_dict(self):
        return {"velocity": [v.detach().cpu().clone() for v in self.velocity]}

    def load_state_dict(self, saved):
        for velocity, value in zip(self.velocity, saved["velocity"]):
            velocity.copy_(value)


def split_fragments(sizes, count):
    """[(begin, end)] of `count` runs of consecutive parameters (their element counts `sizes`), none empty, the
    largest as small as the order allows: a run ends where the elements so far pass its share of the total."""
    total, bounds, begin, so_far = sum(sizes), [], 0, 0
    for index, size in enumerate(sizes):
        so_far += size
        left = len(sizes) - index - 1  # parameters after this one
        runs_left = count - len(bounds) - 1  # runs still to begin after this one ends
        if runs_left and (so_far * count >= total * (len(bounds) + 1) or left == runs_left):
            bounds.append((begin, index + 1))
            begin = index + 1
    bounds.append((begin, len(sizes)))
    return bounds


class _Fragment:
    """A run of parameters synchronised together: their anchor, outer optimizer, Aggregator and exchange buffer."""

    def __init__(self, parameters, offset, outer_optimizer, options):
        self.parameters = parameters
        self.offset = offset  # it synchronises after steps offset + k * sync_every
        self.anchor = [torch.nn.Parameter(p.detach().clone().float()) for p in parameters]
        self.optimizer = outer_optimizer(self.anchor)
        self.buffer = torch.zeros(sum(p.numel() for p in parameters), dtype=torch.float32,
                                  device=parameters[0].device)
        self.deltas = [d.view(p.shape) for d, p in zip(self.buffer.split([p.numel() for p in parameters]), parameters)]
        self.aggregator = gradagg.Aggregator(**options)
        self.pending = None  # the exchange in flight (a gradagg.Pending)
        self.sent_at = None  # the step after which the last exchange began
        self.due = None  # the step at whose end the exchange in the buffer is applied


class LocalSteps(HookTraffic):
    """The outer loop of local-step training across nodes. model: the module (not yet wrapped in DDP; its trainable
    parameters are synchronised); sync_every: inner steps between two synchronisations of each fragment;
    outer_optimizer: a callable that makes the outer optimizer over a list of tensors (default `nesterov`), or a
    NesterovInside;
    fragments, delay, mix: the streaming form (above); options: gradagg.Aggregator's (bits=DEFAULT_BITS, 4, unless
    given or set by GRADAGG_BITS; bits=32 sends float32, DiLoCo's own outer gradient). Collective over every rank, after
    torch.distributed is initialised: it copies world rank 0's parameters to every rank and makes node_group, the
    process group of this rank's node for DDP."""

    def __init__(self, model, sync_every, outer_optimizer=None, fragments=1, delay=0, mix=0.0, **options):
        super().__init__()
        if not dist.is_available() or not dist.is_initialized():
            raise UsageError("gradagg.torch.LocalSteps: initialise torch.distributed first "
                             "(gradagg.torch.init_process_group_from_mpi())")
        if isinstance(model, torch.nn.parallel.DistributedDataParallel):
            raise UsageError("gradagg.torch.LocalSteps: pass the module before DDP wraps it, then wrap it with "
                             "DistributedDataParallel(model, process_group=local.node_group): DDP over every rank "
                             "would synchronise across the nodes at every step")
        for name, value, low in (("sync_every", sync_every, 1), ("fragments", fragments, 1), ("delay", delay, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise UsageError(f"gradagg.torch.LocalSteps: {name} must be a whole number >= {low}, not {value!r}")
        if fragments > sync_every:
            raise UsageError(f"gradagg.torch.LocalSteps: fragments ({fragments}) must be at most sync_every "
                             f"({sync_every}): fragments synchronise at different steps of each period")
        if delay > sync_every // fragments:
            raise UsageError(f"gradagg.torch.LocalSteps: delay ({delay}) must be at most sync_every // fragments "
                             f"({sync_every // fragments}), the steps between two fragments' exchanges")
        if not 0.0 <= mix < 1.0 or (mix and not delay):
            raise UsageError(f"gradagg.torch.LocalSteps: mix must be in [0, 1), and 0 without a delay, not {mix!r}")
        self.parameters = [p for p in model.parameters() if p.requires_grad]
        if not self.parameters:
            raise UsageError("gradagg.torch.LocalSteps: the model has no trainable parameters")
        if len(self.parameters) < fragments:
            raise UsageError(f"gradagg.torch.LocalSteps: {fragments} fragments of {len(self.parameters)} "
                             "parameters: a fragment holds one parameter at least")
        if len({p.device for p in self.parameters}) > 1:
            raise UsageError("gradagg.torch.LocalSteps: the parameters lie on more than one device")
        self.model, self.sync_every, self.fragments_count, self.delay, self.mix = (model, sync_every, fragments,
                                                                                 delay, mix)
        self.options = dict(options) if width_given(options) else dict(options, bits=DEFAULT_BITS)
        self.bits = gradagg.options.make_options(self.options).bits
        self.steps = 0
        self._shapes = [tuple(p.shape) for p in self.parameters]
        self._inside = isinstance(outer_optimizer, NesterovInside)
        self._agree()
        for p in self.parameters:  # one starting point: DDP would copy only the node's rank 0
            dist.broadcast(p.data, src=0)
        spacing = sync_every // fragments
        bounds = split_fragments([p.numel() for p in self.parameters], fragments)
        self.fragments = [_Fragment(self.parameters[b:e], f * spacing, outer_optimizer or nesterov, self.options)
                          for f, (b, e) in enumerate(bounds)]
        lifecycle.keep_until_exit([f.aggregator for f in self.fragments])  # closed at exit, in order, on every rank
        first = self.fragments[0].aggregator
        self.nodes, self.ranks_per_node, self.node, self.local_rank = (first.nodes, first.ranks_per_node,
                                                                       first.node, first.local_rank)
        self.node_group = self._node_group()

    def _agree(self):
        """Raises UsageError on every rank, naming a rank and what differs, unless every rank has these settings."""
        mine = {"sync_every": self.sync_every, "fragments": self.fragments_count, "delay": self.delay,
                "mix": self.mix, "bits": self.bits, "parameter shapes": self._shapes,
                "the outer momentum inside the exchange (NesterovInside)": self._inside}
        everyone = [None] * dist.get_world_size()
        dist.all_gather_object(everyone, mine)
        for rank, theirs in enumerate(everyone):
            for name, value in theirs.items():
                if value != everyone[0][name]:
                    shown = (lambda v: f"{len(v)} parameters of {sum(map(math.prod, v))} elements"
                             if name == "parameter shapes" else repr(v))
                    raise UsageError(f"gradagg.torch.LocalSteps: {name} is {shown(value)} on rank {rank} but "
                                     f"{shown(everyone[0][name])} on rank 0: every rank must pass the same")

    def _node_group(self):
        """torch.distributed's group of this rank's node, as gradagg places the nodes (every rank makes every node's
        group, in node order, as new_group requires)."""
        places = [None] * dist.get_world_size()
        dist.all_gather_object(places, self.node)
        group = None
        for node in range(self.nodes):
            made = dist.new_group([rank for rank, n in enumerate(places) if n == node])
            if node == self.node:
                group = made
        return group

    def step(self):
        """Call after every inner optimizer step: counts it, applies the exchanges due now and starts those due."""
        self.steps += 1
        for fragment in self.fragments:
            if fragment.due == self.steps:
                self._apply(fragment)
        for fragment in self.fragments:
            if (self.steps - fragment.offset) % self.sync_every == 0:
                self._send(fragment)

    def synchronize(self):
        """Every fragment synchronised now: the nodes end with the same parameters, the anchor. An exchange in
        flight is applied at once (with no mix), any other fragment not sent at this step is sent and applied. For
        the end of training, or an evaluation of the shared model."""
        for fragment in self.fragments:
            if fragment.due is not None:
                self._apply(fragment, mix=0.0)
            elif fragment.sent_at != self.steps:
                self._send(fragment, delay=0)

    def _send(self, fragment, delay=None):
        self._check_model()
        with torch.no_grad():
            if self.local_rank == 0:
                for anchor, p, delta in zip(fragment.anchor, fragment.parameters, fragment.deltas):
                    torch.sub(anchor, p.float(), out=delta)
                if hasattr(fragment.optimizer, "before_exchange"):  # NesterovInside
                    fragment.optimizer.before_exchange(fragment.deltas)
            else:
                fragment.buffer.zero_()
        delay = self.delay if delay is None else delay
        fragment.sent_at = self.steps
        if delay == 0:
            fragment.aggregator.aggregate(fragment.deltas)
            self._count(fragment.aggregator)
            fragment.due = self.steps
            self._apply(fragment)
        else:
            fragment.pending = fragment.aggregator.aggregate_async(fragment.deltas)
            fragment.due = self.steps + delay

    def _land(self, fragment):
        if fragment.pending is not None:
            pending, fragment.pending = fragment.pending, None
            pending.wait()
            self._count(fragment.aggregator)

    def _apply(self, fragment, mix=None):
        mix = self.mix if mix is None else mix
        self._land(fragment)
        with torch.no_grad():
            fragment.buffer.mul_(1.0 / self.nodes)
            for anchor, delta in zip(fragment.anchor, fragment.deltas):
                anchor.grad = delta
            fragment.optimizer.step()
            for anchor, p in zip(fragment.anchor, fragment.parameters):
                anchor.grad = None
                if mix:
                    p.copy_(torch.lerp(anchor, p.float(), mix))
                else:
                    p.copy_(anchor)
        fragment.due = None

    def _check_model(self):
        now = [p for p in self.model.parameters() if p.requires_grad]
        if len(now) != len(self.parameters) or any(a is not b or tuple(a.shape) != s
                                                   for a, b, s in zip(now, self.parameters, self._shapes)):
            raise UsageError(f"gradagg.torch.LocalSteps: rank {dist.get_rank()}: the model's trainable parameters "
                             "are no longer those it was made with (replaced, reshaped, frozen or added): make a new "
                             "LocalSteps for the new model")

    def bytes_per_step(self):
        """Bytes this rank sent across nodes per inner step so far."""
        return self.bytes_sent / self.steps if self.steps else 0.0

    def state_dict(self):
        """What the outer loop holds, for torch.save beside the inner optimizer (each rank saves its own): the step
        count, this rank's trainable parameters (the nodes' differ between synchronisations), the anchor, each outer
        optimizer's state, the carried quantization error, and an exchange in flight (waited for here: its result is
        saved and applied at its step, as it would have been)."""
        refuse_distributed_checkpoint("gradagg.torch.LocalSteps")
        for fragment in self.fragments:
            self._land(fragment)
        return {"format": FORMAT, "settings": self._settings(), "steps": self.steps,
                "bytes_sent": self.bytes_sent, "float_bytes": self.float_bytes,
                "parameters": [p.detach().cpu().clone() for p in self.parameters],
                "fragments": [{"anchor": [a.detach().cpu().clone() for a in f.anchor],
                               "optimizer": f.optimizer.state_dict(),
                               "residuals": checkpoint_residuals(f.aggregator),
                               "due": f.due,
                               "landed": None if f.due is None else f.buffer.cpu().clone()}
                              for f in self.fragments]}

    def load_state_dict(self, saved):
        """Resumes from state_dict() of this rank of an earlier run with the same settings and topology, the
        model's trainable parameters included (LocalSteps() copied rank 0's over them), so that the run goes on
        bitwise as the one that saved it once the inner optimizer is restored too."""
        refuse_distributed_checkpoint("gradagg.torch.LocalSteps")
        if not isinstance(saved, dict) or saved.get("format") != FORMAT:
            raise UsageError("gradagg.torch.LocalSteps: load_state_dict takes what LocalSteps.state_dict() returned")
        if saved["settings"] != self._settings():
            raise UsageError(f"gradagg.torch.LocalSteps: rank {dist.get_rank()}: the checkpoint's settings "
                             f"{saved['settings']} are not this LocalSteps' {self._settings()}")
        if any(f.due is not None for f in self.fragments):
            raise UsageError("gradagg.torch.LocalSteps: load_state_dict with an exchange in flight")
        self.steps, self.bytes_sent, self.float_bytes = saved["steps"], saved["bytes_sent"], saved["float_bytes"]
        with torch.no_grad():
            for p, value in zip(self.parameters, saved["parameters"]):
                p.copy_(value)
            for fragment, state in zip(self.fragments, saved["fragments"]):
                for anchor, value in zip(fragment.anchor, state["anchor"]):
                    anchor.copy_(value)
                fragment.optimizer.load_state_dict(state["optimizer"])
                if state["residuals"]["tensor_sizes"]:
                    fragment.aggregator.import_residuals(state["residuals"])
                fragment.due = state["due"]
                if state["landed"] is not None:
                    fragment.buffer.copy_(state["landed"])

    def _settings(self):
        return {"sync_every": self.sync_every, "fragments": self.fragments_count, "delay": self.delay,
                "mix": self.mix, "bits": self.bits, "nodes": self.nodes, "ranks_per_node": self.ranks_per_node,
                "node": self.node, "local_rank": self.local_rank, "parameter shapes": self._shapes,
                "momentum inside": self._inside,
                "options": {k: v for k, v in sorted(self.options.items()) if k != "bits"}}
