"""Adam and AdamW for gradagg's DDP hook: 1-bit Adam's mechanism (docs/DESIGN.md, "Momentum and Adam").

    state = gradagg.torch.GradaggState(momentum=0.9)   # 1 bit behind an automatic early phase at 2 bits
    model.register_comm_hook(state, gradagg.torch.comm_hook)
    optimizer = gradagg.torch.AdamW(model.parameters(), state, lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)

The hook aggregates Adam's first moment rather than the gradient: each rank sends beta1 * m + g, and every rank gets
back the new m (its p.grad), identical everywhere. These optimizers step with Adam's bias-corrected first moment
(1 - beta1) m / (1 - beta1^t) over a denominator sqrt(v) + eps, AdamW decaying the weights by lr * weight_decay first
and Adam adding weight_decay * p to the gradient (L2), as torch's do. Where the second moment v comes from depends on
what crosses the nodes (gradagg/torch/second_moment.py).

Below 32 bits every element's step is bounded: |(1 - beta1) m / (1 - beta1^t) / (sqrt(v) + eps)| <= max_update,
by default the largest step Adam's own update can take with these betas, (1 - beta1) / sqrt((1 - beta2)(1 -
beta1^2 / beta2)) (1.17 for 0.9 / 0.95). An element whose gradient is almost always zero (attention's key bias) has
a tiny v, yet a 1-bit code hands it plus or minus its bucket's scale every step; unbounded, it steps by up to
scale / eps (an 85M GPT diverged so). A 1-bit element is plus or minus one scale, so the bound is a floor of its
bucket's |m| / max_update under the denominator: exact Adam never reaches it.

The guard (guard=G) is gradagg/torch/step_guard.py.

Under FSDP2 (gradagg.torch.FSDPGradaggState) the parameters are DTensor shards: the optimizer steps on each rank's
local shard, the "rank" above is a node (its ranks' mean gradient, which FSDP2's reduce-scatter hands the hook), the
synchronisations run between the nodes, and every per-parameter sum (levels, norms, the clipping norm, the guard's
RMS and finiteness) is also summed over the node's shards, so that every rank decides alike.

Where clipping or L2 changes g, the optimizer writes m = beta1 * m_previous + g back into the hook's momentum, so the
next step builds on what was applied. The state (step, previous m, the rank's own second moment, the denominator,
the guard's mean and schedule) is the optimizer's state_dict; each rank saves its own. Parameter groups take lr,
betas, eps and weight_decay as torch's do; every group's beta1 must be the hook's momentum.
"""
import math

import torch

from .common import distributed_checkpoint_calls, refuse_distributed_checkpoint
from .second_moment import SecondMoment, local_shard, second_moment_policy
from .step_guard import StepGuard

_CPU_CHUNK = 1 << 18  # elements
_SPIKE = 1000.0  # a second moment's level that rose this many times (its gradients' norm 30x) is a loss spike


def _chunks(params):
    """On GPUs the whole list, one multi-tensor kernel per operation. On CPUs lists of at most _CPU_CHUNK elements
    (or one larger tensor): a step makes several passes, and over a chunk they find its tensors still in the cache;
    over the whole model each pass would read them from memory (a 3.2M GPT: 36 ms a step against 21 while the second
    moment learns)."""
    if not params or params[0].device.type != "cpu":
        yield params
        return
    chunk, elements = [], 0
    for p in params:
        if chunk and elements + p.numel() > _CPU_CHUNK:
            yield chunk
            chunk, elements = [], 0
        chunk.append(p)
        elements += p.numel()
    yield chunk


def adam_step_bound(beta1, beta2):
    """The largest |m_hat / sqrt(v_hat)| Adam's update can reach with these betas (Cauchy-Schwarz over the two
    exponential averages), or None where it is unbounded (beta1^2 >= beta2)."""
    if beta1 * beta1 >= beta2:
        return None
    return (1.0 - beta1) / math.sqrt((1.0 - beta2) * (1.0 - beta1 * beta1 / beta2))


def _hook_loss_scale(hook_state, device):
    """The loss scale the hook's momentum is in (a device scalar), or None without a GradScaler in use."""
    loss_scale = getattr(hook_state, "loss_scale", None)  # a stand-in hook of a test may have none
    return loss_scale(device) if loss_scale is not None else None


def _clamp_(tensors, bound):
    if hasattr(torch, "_foreach_clamp_max_"):
        torch._foreach_clamp_max_(tensors, bound)
        torch._foreach_clamp_min_(tensors, -bound)
    else:  # torch 1.x
        for t in tensors:
            t.clamp_(-bound, bound)


class AdamW(SecondMoment, StepGuard, torch.optim.Optimizer):
    """AdamW on the momentum that gradagg's hook returns (see the module's text). `hook_state` is the GradaggState
    registered with the model's comm hook; its momentum must equal beta1."""

    decoupled_weight_decay = True

    def __init__(self, params, hook_state, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False,
                 *, max_grad_norm=None, second_moment=None, variance_steps=None, variance_interval=64,
                 variance_bits=4, max_update=None, guard=2.5):
        if amsgrad:
            raise ValueError("gradagg.torch: amsgrad is not supported (the second moment is averaged over the ranks "
                             "now and then, so its running maximum has no role)")
        if not lr > 0.0 or not eps > 0.0 or weight_decay < 0.0:
            raise ValueError(f"gradagg.torch: need lr > 0, eps > 0, weight_decay >= 0 (got {lr}, {eps}, "
                             f"{weight_decay})")
        if max_grad_norm is not None and not max_grad_norm > 0.0:
            raise ValueError(f"gradagg.torch: max_grad_norm must be > 0 or None, not {max_grad_norm}")
        if variance_steps is not None and variance_steps < 0:
            raise ValueError(f"gradagg.torch: variance_steps must be >= 0 or None, not {variance_steps}")
        if int(variance_interval) != variance_interval or variance_interval < 1:
            raise ValueError(f"gradagg.torch: variance_interval must be a whole number >= 1, not {variance_interval}")
        if variance_bits not in (2, 4, 8, 32):
            raise ValueError(f"gradagg.torch: variance_bits must be 2, 4, 8 or 32, not {variance_bits}")
        if max_update is not None and not max_update > 0.0:
            raise ValueError(f"gradagg.torch: max_update must be > 0 or None, not {max_update}")
        if not guard >= 0.0 or 0.0 < guard <= 1.0:
            raise ValueError(f"gradagg.torch: guard must be 0 (off) or > 1, not {guard}")
        self.hook_state = hook_state
        self._sharded = getattr(hook_state, "sum_over_shards", None) is not None  # FSDP2's shards
        self.max_grad_norm = max_grad_norm
        quantized = hook_state.bits < 32
        self.policy, self.variance_steps = second_moment_policy(hook_state, second_moment, variance_steps)
        self.variance_interval = int(variance_interval)
        self.variance_bits = variance_bits
        self.max_update = max_update
        self.guard = guard if quantized else 0.0
        self.events = []  # (step, what happened), from the guard
        # The guard's running mean and its count; the optimizer's steps taken, and the last restart of the schedule.
        self._guard = {"mean": 0.0, "count": 0, "step": 0, "restart": 0, "due": False}
        self._factors = {}  # parameter -> how far its second moment's level moved since the last synchronisation
        self._frozen = {}  # parameter -> ((variance step, beta2, eps), its denominator), once v is frozen
        self._aggregators = {}  # the synchronisation's, by purpose: made at its first use (collective)
        self._stash = {}  # parameter -> this rank's gradient of a step that synchronises
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay))
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            if beta1 != hook_state.momentum or not 0.0 < beta1 < 1.0:
                raise ValueError(f"gradagg.torch: beta1 ({beta1}) must be the hook's momentum "
                                 f"(GradaggState(momentum={beta1})), which is {hook_state.momentum}")
            if not 0.0 <= beta2 < 1.0:
                raise ValueError(f"gradagg.torch: beta2 must be in [0, 1), not {beta2}")
            if quantized and max_update is None and adam_step_bound(beta1, beta2) is None:
                raise ValueError(f"gradagg.torch: with betas ({beta1}, {beta2}) Adam's step has no bound "
                                 "(beta1^2 >= beta2): give max_update")
        self._groups = {p: group for group in self.param_groups for p in group["params"]}
        if self.policy == "synced":
            observers = getattr(hook_state, "observers", None)
            if observers is None:
                raise ValueError("gradagg.torch: below 32 bits the optimizer needs the hook's GradaggState (it hands "
                                 "over each rank's own gradient), or variance_steps=N")
            observers.append(self._observe)


    # --- the step ---

    def _cohorts(self):
        """The parameters with a p.grad, in lists that step together: per parameter group and step count (one list
        per group unless some parameters missed steps). Yields the group and lists of the parameters, the tensors the
        step writes (the parameters, or their local shards under FSDP2), their p.grad (the hook's m, local too), their
        states, previous m and second moments."""
        for group in self.param_groups:
            cohorts = {}
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise ValueError("gradagg.torch: sparse gradients are not supported")
                state = self.state[p]
                if "step" not in state:
                    state["step"] = 0
                    state["variance_step"] = 0
                    state["previous"] = torch.zeros_like(local_shard(p), memory_format=torch.preserve_format)
                    if self.policy != "synced":
                        state["exp_avg_sq"] = torch.zeros_like(local_shard(p), memory_format=torch.preserve_format)
                cohorts.setdefault((state["step"], state["variance_step"]), []).append(p)
            for cohort in cohorts.values():
                for params in _chunks(cohort):
                    states = [self.state[p] for p in params]
                    yield (group, params, [local_shard(p) for p in params], [local_shard(p.grad) for p in params],
                           states, [s["previous"] for s in states], [s.get("exp_avg_sq") for s in states])

    def state_dict(self):
        refuse_distributed_checkpoint("gradagg.torch.AdamW")
        saved = super().state_dict()
        saved["gradagg"] = {"guard": dict(self._guard), "events": list(self.events), "policy": self.policy,
                            "variance_bits": self.variance_bits}
        return saved

    def load_state_dict(self, state_dict):
        refuse_distributed_checkpoint("gradagg.torch.AdamW")
        state_dict = dict(state_dict)
        ours = state_dict.pop("gradagg", None)
        if ours is not None and ours["policy"] != self.policy:
            raise ValueError(f"gradagg.torch: the checkpoint's second-moment policy is {ours['policy']!r}, this "
                             f"optimizer's {self.policy!r} (the hook's bits, warm-up or variance_steps differ)")
        if ours is not None and ours.get("variance_bits", self.variance_bits) != self.variance_bits:
            raise ValueError(f"gradagg.torch: the checkpoint averaged the second moment at {ours['variance_bits']} "
                             f"bits, this optimizer at {self.variance_bits} (variance_bits, whose default was 8 "
                             "before it was 4): give the saved one")
        self._frozen.clear()
        super().load_state_dict(state_dict)
        self._groups = {p: group for group in self.param_groups for p in group["params"]}
        # torch casts a state's floating tensors to the parameter's dtype; the rank's own sums stay float32
        saved = [i for group in state_dict["param_groups"] for i in group["params"]]
        for p, index in zip([p for group in self.param_groups for p in group["params"]], saved):
            for key in ("local_exp_avg_sq", "local_norm"):
                value = state_dict["state"].get(index, {}).get(key)
                if value is not None:
                    self.state[p][key] = value.to(device=p.device, dtype=torch.float32)
        if ours is not None:
            self._guard, self.events = dict(ours["guard"]), list(ours["events"])

    def add_param_group(self, param_group):
        super().add_param_group(param_group)
        if hasattr(self, "hook_state"):  # torch's __init__ adds the first groups before the checks run
            beta1 = self.param_groups[-1]["betas"][0]
            if beta1 != self.hook_state.momentum:
                self.param_groups.pop()
                raise ValueError(f"gradagg.torch: beta1 ({beta1}) must be the hook's momentum "
                                 f"({self.hook_state.momentum})")
            self._groups = {p: group for group in self.param_groups for p in group["params"]}

    @torch.no_grad()
    def step(self, closure=None):
        if distributed_checkpoint_calls() == "_init_optim_state":
            # DCP's step at lr 0 on zero gradients, to make a state: left undone, so that DCP can put its lr back;
            # state_dict() or load_state_dict(), which DCP calls next, refuses
            return None
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        flush = getattr(self.hook_state, "flush", None)  # FSDP2's: a step's momenta, if a module got no gradient
        if flush is not None:
            flush()
        cohorts = list(self._cohorts())
        calls = getattr(self.hook_state, "calls", None)  # the hook's calls so far (None: a state that counts none)
        if cohorts and calls is not None and not calls and getattr(self.hook_state, "_restore", None) is None:
            # p.grad is then the rank's raw gradient, not the hook's averaged momentum: the step would be wrong.
            raise ValueError("gradagg.torch.AdamW: the gradients did not come through gradagg's hook: register it "
                             "before training (ddp.register_comm_hook(state, gradagg.torch.comm_hook), or "
                             "FSDPGradaggState(...).attach(model) under FSDP2)")
        learns = self._variance_learns()
        quantized = self.hook_state.bits < 32
        step_now = self._guard["step"] + 1
        scale, gradients = 1.0, None
        if self.policy == "synced":
            every = [p for _, params, *_ in cohorts for p in params]
            if every and (self._due(step_now) or any("root_shape" not in self.state[p] for p in every)):
                self._synchronise(every)
                self._guard["due"] = False
            factors, rose, stale, norm = self._levels(every) if every else ([], 1.0, False, 0.0)
            if self.max_grad_norm is not None:
                scale = min(1.0, self.max_grad_norm / (norm + 1e-6))
            self._factors = dict(zip(every, factors))
            if rose > _SPIKE and self.guard:  # a gradient's scale jumped: a loss spike, the guard's event
                self._event(step_now, f"a second moment rose {rose:.3g}x since it was last averaged")
                self._guard["restart"], self._guard["count"] = step_now, 0
            if stale:  # the shape is stale: averaged again at the next step
                self._guard["due"] = True
        self._stash.clear()

        def gradient(group, momenta, states, previous):
            """g = m - beta1 m_previous, the step's averaged gradient: needed while v learns, or to add L2 to."""
            if (self._learns(states) or scale != 1.0 or
                    (group["weight_decay"] and not self.decoupled_weight_decay)):
                return torch._foreach_sub(momenta, torch._foreach_mul(previous, group["betas"][0]))
            return None

        if self.max_grad_norm is not None and learns:  # the norm needs every g first
            gradients = [gradient(group, momenta, states, previous)
                         for group, _, _, momenta, states, previous, _ in cohorts]
            squares = [g.float().square().sum() for gs in gradients for g in gs]
            if squares:
                norm = float(self._over_shards(torch.stack(squares).sum()).sqrt())
                scale = min(1.0, self.max_grad_norm / (norm + 1e-6))
        finite = True
        if self.guard:  # every momentum finite; under FSDP2, over the node's shards too
            checks = [torch.isfinite(m).all() for _, _, _, momenta, *_ in cohorts for m in momenta]
            if checks and self._sharded:  # the count of non-finite shards, summed over the node's
                finite = not bool(self._over_shards((~torch.stack(checks)).sum().float()))
            elif checks:
                finite = bool(torch.stack(checks).all())
        if not finite:  # nothing of this step is applied; the hook kept its momentum as well
            self._check_guard(step_now, 0.0, 0, False)
            return loss
        square_sums, elements = [], 0
        for index, (group, params, tensors, momenta, states, previous, exp_avg_sqs) in enumerate(cohorts):
            beta1, beta2 = group["betas"]
            lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
            l2 = bool(weight_decay) and not self.decoupled_weight_decay
            g = gradients[index] if gradients is not None else gradient(group, momenta, states, previous)
            if scale != 1.0:
                torch._foreach_mul_(g, scale)
            if l2:
                torch._foreach_add_(g, tensors, alpha=weight_decay)
            if scale != 1.0 or l2:  # what was applied becomes the hook's momentum too
                momenta = torch._foreach_add(g, previous, alpha=beta1)
                # the hook's momentum is in units of the loss scale, p.grad unscaled
                loss_scale = _hook_loss_scale(self.hook_state, tensors[0].device)
                for p, momentum in zip(params, momenta):
                    hook_momentum = self.hook_state.momentum_of(p)
                    if hook_momentum is not None:
                        hook_momentum.copy_(momentum if loss_scale is None else momentum * loss_scale)
            learning = self._learns(states)
            step = states[0]["step"] + 1
            for state in states:
                state["step"] = step
            if learning:
                torch._foreach_mul_(exp_avg_sqs, beta2)
                torch._foreach_addcmul_(exp_avg_sqs, g, g, value=1.0 - beta2)
                for state in states:
                    state["variance_step"] = step
            if weight_decay and self.decoupled_weight_decay:
                torch._foreach_mul_(tensors, 1.0 - lr * weight_decay)
            first = (1.0 - beta1) / (1.0 - beta1 ** step)
            denominators = self._denominators(params, states, exp_avg_sqs, beta2, eps)
            if quantized:  # the bounded step (module text)
                updates = torch._foreach_div(momenta, denominators)
                torch._foreach_mul_(updates, first)
                _clamp_(updates, self.max_update or adam_step_bound(beta1, beta2))
                if self.guard:
                    square_sums += [u.float().square().sum() for u in updates]
                    elements += sum(u.numel() for u in updates)
                torch._foreach_add_(tensors, updates, alpha=-lr)
            else:
                torch._foreach_addcdiv_(tensors, momenta, denominators, value=-lr * first)
            for old, momentum in zip(previous, momenta):
                old.copy_(momentum)
        if self.guard and square_sums:
            square_sum = torch.stack(square_sums).sum()
            if self._sharded:  # the step's RMS over the whole parameters
                totals = self._over_shards(torch.stack([square_sum.double(), torch.tensor(
                    float(elements), dtype=torch.float64, device=square_sum.device)]))
                square_sum, elements = totals[0], int(totals[1])
            self._check_guard(step_now, float(square_sum), elements, True)
        self._guard["step"] = step_now
        return loss


class Adam(AdamW):
    """Adam (weight decay as L2, added to the gradient) on the momentum that gradagg's hook returns; see AdamW."""

    decoupled_weight_decay = False

    def __init__(self, params, hook_state, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False,
                 **options):
        super().__init__(params, hook_state, lr, betas, eps, weight_decay, amsgrad, **options)
