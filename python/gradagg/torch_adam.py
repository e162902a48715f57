"""Adam and AdamW for gradagg's DDP hook: 1-bit Adam's mechanism (docs/DESIGN.md, "Momentum and Adam").

    state = gradagg.torch.GradaggState(momentum=0.9)   # 1 bit behind an automatic early phase at 2 bits
    model.register_comm_hook(state, gradagg.torch.comm_hook)
    optimizer = gradagg.torch.AdamW(model.parameters(), state, lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)

The hook aggregates Adam's first moment rather than the gradient: each rank sends beta1 * m + g, and every rank gets
back the new m (its p.grad), identical everywhere. These optimizers step with Adam's bias-corrected first moment
(1 - beta1) m / (1 - beta1^t) over a denominator sqrt(v) + eps, AdamW decaying the weights by lr * weight_decay first
and Adam adding weight_decay * p to the gradient (L2), as torch's do. Where the second moment v comes from depends on
what crosses the nodes:

  - **32 bits** (or a single node): g = m - beta1 * m_previous is the exact averaged gradient, and v learns from it
    every step: torch's AdamW to float rounding, max_grad_norm clipping g as clip_grad_norm_ would.
  - **below 32 bits, the default policy**: a 1-bit m says little about any element's variance (every element of a
    quantization bucket decodes to one of two values), so v is not learnt from it. Each rank keeps the second moment
    of its own full-precision gradient, u = EMA(g_rank^2), which the hook hands over before sending; the ranks
    average u (as sqrt(u), at variance_bits) at steps 1, 2, 4, 8, ... and then every variance_interval steps, and the
    denominator is fixed from that average in between, the same on every rank. A rank's gradient is noisier than
    the average over N ranks, so sqrt(u) overstates Adam's denominator; at each synchronisation the ranks also sum
    their gradients (every 8th element, at 8 bits) and the squared norms of those, and each parameter's v is divided
    by the ratio mean ||g_rank||^2 / ||mean g_rank||^2 (between 1 and N). No step count to choose per model.
  - **the early phase** (the hook's default, GradaggState(warmup_steps="auto")): early in training the ranks'
    gradients agree and a 1-bit first moment trails (1 bit from the first step ended 3.7% behind DDP on a 10.8M GPT),
    so the hook sends its first steps at warmup_bits (2) and this optimizer ends that phase at the first
    synchronisation where the same ratio, over the whole model, says that one rank's gradient carries at most 1.5
    times as much signal as noise (_end_early_phase). That was after 64-256 of 1200 steps on GPTs of 10.8M-85M
    parameters, 1.42-1.58 bits per element in all; each run learns its own moment, the same on every rank.
  - **the older policy**, with variance_steps=N (or a hook warm-up, GradaggState(warmup_steps=N)): v learns from g
    during the first N steps and is frozen after them, as 1-bit Adam does. variance_steps=N keeps it with any hook.
    second_moment="synced" or "frozen" chooses either whatever the hook's warm-up: a warm-up then only sets the
    first moment's bits (on a 2-layer GPT the synchronised second moment behind 60 of 300 steps at 4 bits matched
    DDP, and without them trailed by 1.8%: the first moment, not the second, needs the early bits).

Below 32 bits every element's step is bounded: |(1 - beta1) m / (1 - beta1^t) / (sqrt(v) + eps)| <= max_update,
by default the largest step Adam's own update can take with these betas, (1 - beta1) / sqrt((1 - beta2)(1 -
beta1^2 / beta2)) (1.17 for 0.9 / 0.95). An element whose gradient is almost always zero (attention's key bias) has
a tiny v, yet a 1-bit code hands it plus or minus its bucket's scale every step; unbounded, it steps by up to
scale / eps (an 85M GPT diverged so). A 1-bit element is plus or minus one scale, so the bound is a floor of its
bucket's |m| / max_update under the denominator: exact Adam never reaches it.

The guard (guard=G, default 2.5; 0 turns it off): the root mean square of the bounded step is followed by a running
mean; a step whose RMS is over G times that mean, or a non-finite m, means the run is leaving its path (a loss
spike, a second moment gone stale). The optimizer then skips the step if m is not finite, and restarts the
synchronisation schedule (v is averaged again at once, then after 1, 2, 4, ... steps), the same on every rank since
all of it is computed from identical values. Each event is logged (logger "gradagg") and kept in `events`; the
synchronisations' bytes count in the hook's bits_per_element().

Under FSDP2 (gradagg.torch.FSDPGradaggState) the parameters are DTensor shards: the optimizer steps on each rank's
local shard, the "rank" above is a node (its ranks' mean gradient, which FSDP2's reduce-scatter hands the hook), the
synchronisations run between the nodes, and every per-parameter sum (levels, norms, the clipping norm, the guard's
RMS and finiteness) is also summed over the node's shards, so that every rank decides alike.

Where clipping or L2 changes g, the optimizer writes m = beta1 * m_previous + g back into the hook's momentum, so the
next step builds on what was applied. The state (step, previous m, the rank's own second moment, the denominator,
the guard's mean and schedule) is the optimizer's state_dict; each rank saves its own. Parameter groups take lr,
betas, eps and weight_decay as torch's do; every group's beta1 must be the hook's momentum.
"""
import logging
import math

import torch

import gradagg

_CPU_CHUNK = 1 << 18  # elements
_GUARD_WARMUP = 10  # steps of the running mean before the guard may fire
_GUARD_DECAY = 0.95
_MAX_SKIPS = 20  # steps in a row with a non-finite momentum: the run is dead, and the optimizer says so
_DRIFT = 4.0  # a second moment's level that moved this many times either way since it was averaged is stale
_SPIKE = 1000.0  # one that rose this many times (its gradients' norm 30x) is the guard's event: a loss spike
_RATIO_STRIDE = 8  # the noise ratio reads every 8th element of a parameter of at least _RATIO_MIN elements
_RATIO_MIN = 2048
# An automatic early phase ends where one rank's gradient carries at most this many times as much signal as noise
# (power; bench/results/gpt/: 2 ended it too early on an 85M GPT).
_EARLY_END_SNR = 1.5
_log = logging.getLogger("gradagg")


def _ratio_sample(g):
    """The elements of a flat gradient that the noise ratio reads: a ratio of two sums of squares needs no more, and
    the synchronisation sends 8 bits for each of them."""
    return g[::_RATIO_STRIDE] if g.numel() >= _RATIO_MIN else g


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


def synchronises(step, restart, interval):
    """Whether the ranks average their second moments at optimizer step `step` (counted from 1): 1, 2, 4, ... steps
    after the last restart, then every `interval` steps."""
    since = step - restart
    return since >= 1 and ((since & (since - 1) == 0 and since <= interval) or since % interval == 0)


def _local(tensor):
    """A DTensor's local shard (FSDP2), the tensor itself otherwise; in place it changes the DTensor too."""
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


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


class AdamW(torch.optim.Optimizer):
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
        # Where v comes from: "exact" (32 bits: from g, every step), "frozen" (from g for variance_steps, then
        # frozen), "synced" (every rank's own gradient, averaged at growing intervals).
        if second_moment not in (None, "frozen", "synced"):
            raise ValueError(f"gradagg.torch: second_moment must be 'frozen', 'synced' or None, not {second_moment!r}")
        if second_moment == "synced" and variance_steps is not None:
            raise ValueError("gradagg.torch: variance_steps is the frozen second moment's; not with 'synced'")
        automatic = getattr(hook_state, "warmup", None) == "auto"  # an early phase that this optimizer ends
        if not quantized:
            self.policy = "exact"
        elif second_moment == "frozen" or (second_moment is None and (
                variance_steps is not None or (hook_state.warmup_steps > 0 and not automatic))):
            if automatic:
                raise ValueError("gradagg.torch: the hook's automatic early phase (warmup_steps='auto') is ended by "
                                 "the synchronised second moment, not a frozen one (second_moment='frozen' or "
                                 "variance_steps=N): give the hook warmup_steps=N for that")
            self.policy = "frozen"
            variance_steps = hook_state.warmup_steps if variance_steps is None else variance_steps
            if not variance_steps >= 1:  # frozen at once: every denominator eps, sign descent at max_update
                raise ValueError("gradagg.torch: a frozen second moment is learnt over the first steps, and there are "
                                 f"none ({variance_steps}): give the hook warmup_steps=N or the optimizer "
                                 "variance_steps=N (N >= 1), or take the synchronised second moment (second_moment="
                                 "'synced', the default without a warm-up)")
        else:
            self.policy = "synced"
        self.variance_steps = variance_steps if self.policy == "frozen" else None
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

    # --- the rank's own second moment (policy "synced") ---

    def _observe(self, parameters, gradients, scale):
        """The hook's call, before it sends a bucket: this rank's own gradients (full precision, one flat tensor per
        parameter; `scale` the loss scale they are multiplied by, a device scalar, or None) go into u = EMA(g^2).
        A non-finite element (an AMP overflow, whose step the scaler skips) leaves its u as it was."""
        mine = [(p, g) for p, g in zip(parameters, gradients) if p in self._groups]
        if not mine:
            return
        due = self._due(self._guard["step"] + 1)  # the same for every parameter of the call
        for p, g in mine:
            state = self.state[p]
            if "local_exp_avg_sq" not in state:
                state["local_exp_avg_sq"] = torch.zeros(g.numel(), dtype=torch.float32, device=g.device)
                state["local_steps"] = 0
            beta2 = self._groups[p]["betas"][1]
            g = g.float() if scale is None else g.float() / scale
            square = torch.nan_to_num(g * g, nan=0.0, posinf=0.0)  # an overflowed element: u only decays
            u = state["local_exp_avg_sq"]
            u.mul_(beta2).add_(square, alpha=1.0 - beta2)
            state["local_norm"] = square.sum()
            state["local_steps"] += 1
            if due or "root_shape" not in state:  # a parameter met first: averaged at once
                self._stash[p] = _ratio_sample(g).clone()

    def _due(self, step):
        return self._guard["due"] or synchronises(step, self._guard["restart"], self.variance_interval)

    def _aggregator(self, purpose, bits):
        aggregator = self._aggregators.get(purpose)
        if aggregator is None:
            make = getattr(self.hook_state, "make_aggregator", None)  # FSDP2's: the shards across the nodes
            if make is not None:
                aggregator = self._aggregators[purpose] = make(bits=bits)
            else:
                options = dict(getattr(self.hook_state, "options", {}), bits=bits)  # the hook's topology, transport
                aggregator = self._aggregators[purpose] = gradagg.Aggregator(comm=self.hook_state.comm, **options)
        return aggregator

    def _sum(self, purpose, bits, tensors):
        """Collective: `tensors` summed over the ranks in place; the bytes that crossed nodes count in the hook's
        bits_per_element (as traffic, not as gradient elements)."""
        aggregator = self._aggregator(purpose, bits)
        aggregator.aggregate(tensors)
        aggregator.reset_residuals()  # each synchronisation stands alone
        self.hook_state.bytes_sent += aggregator._last_stats().inter_node_bytes_sent
        return aggregator.size

    def _over_shards(self, tensor):
        """Collective over the ranks that hold shards of the same parameters (FSDP2's shard group; nobody under
        DDP): `tensor`, sums of per-parameter pieces, summed over them in place."""
        if self._sharded:
            self.hook_state.sum_over_shards(tensor)
        return tensor

    def _synchronise(self, params):
        """Collective: each parameter's shape of sqrt(v). Every rank's u is averaged as sqrt(u), at variance_bits (a
        range that keeps small elements), and the result rescaled so that its squares sum to what the mean of u sums
        to (that sum travels at 32 bits). A rank's gradient is noisier than the average over N ranks, so that
        overstates Adam's v: each parameter's is divided by the ratio of mean ||g_rank||^2 to ||mean g_rank||^2 in
        this step (read on every 8th element of a large parameter, the gradients summed at 8 bits, the norms at 32),
        which lies between 1 and N; then bias-corrected."""
        if any("local_exp_avg_sq" not in self.state[p] for p in params):
            raise RuntimeError("gradagg.torch: a parameter reached the optimizer without passing the hook "
                               "(is the model wrapped in DDP with gradagg.torch.comm_hook registered?)")
        roots = [self.state[p]["local_exp_avg_sq"].sqrt() for p in params]
        # A parameter met for the first time calls for an averaging that others did not expect: they send zeros
        # for the ratio's gradients and keep their ratio (which they have: they were averaged before).
        kept = [p not in self._stash for p in params]
        gradients = [torch.zeros_like(_ratio_sample(r)) if keep else self._stash.pop(p)
                     for p, r, keep in zip(params, roots, kept)]
        sums = torch.stack([g.square().sum() for g in gradients] +
                           [self.state[p]["local_exp_avg_sq"].sum() for p in params]).to(torch.float32)
        size = self._sum("second_moment", self.variance_bits, roots)
        self._sum("gradient", 8, gradients)  # 4 bits clipped heavy tails: a ratio of 1.26 for 1
        self._sum("norms", 32, [sums])
        self._over_shards(sums)
        count = len(params)
        rows = self._over_shards(torch.stack([torch.stack([g.square().sum(), r.square().sum()])
                                              for g, r in zip(gradients, roots)]))
        # per parameter: sum of ||g_rank||^2, of u's elements (over ranks), ||sum of g_rank||^2, sum of (sum sqrt u)^2
        table = torch.cat([sums.view(2, count).t(), rows.to(torch.float32)], dim=1).tolist()
        if not any(kept):  # every parameter's gradient is in: the whole model's ratio
            self._end_early_phase(size, table)
        for p, root, keep, (norms, level, mean_square, root_square) in zip(params, roots, kept, table):
            state = self.state[p]
            ratio = (state["noise_ratio"] if keep else
                     min(max(norms * size / mean_square, 1.0), float(size)) if mean_square > 0 else 1.0)
            correction = 1.0 - self._groups[p]["betas"][1] ** state["local_steps"]
            # root * sqrt(level / root_square) has squares summing to `level`: the sum of u, over the ranks
            factor = math.sqrt(level / root_square / (size * correction * ratio)) if root_square > 0 else 0.0
            state["root_shape"] = root.mul_(factor).view_as(_local(p)).to(p.dtype)
            state["shape_level"] = level / (size * correction)
            state["noise_ratio"] = ratio

    def _end_early_phase(self, size, rows):
        """A hook in an automatic early phase (GradaggState(warmup_steps="auto")) goes to its width once the ranks'
        gradients disagree enough: the model's noise ratio R = N sum ||g_rank||^2 / ||sum g_rank||^2 over this
        model's parameters (`rows`: their sums, as _synchronise has them) for N ranks. With a signal |G|^2
        and a rank's noise s, R = (|G|^2 + s) / (|G|^2 + s / N); the phase ends where one rank's gradient carries at
        most _EARLY_END_SNR times as much signal as noise, R >= N (1 + k) / (1 + k N) for k = _EARLY_END_SNR (1.25
        for 2 ranks). Early in training the gradients agree and 1 bit trails; R is the same number on every rank, so
        every rank switches after the same step."""
        hook = self.hook_state
        total = sum(row[2] for row in rows)
        if getattr(hook, "warmup", None) != "auto" or not hook.in_warmup() or total <= 0.0:
            return
        ratio = sum(row[0] for row in rows) * size / total
        if ratio >= size * (1.0 + _EARLY_END_SNR) / (1.0 + _EARLY_END_SNR * size):
            hook.end_warmup()
            _log.info("gradagg.torch.AdamW: step %d: noise ratio %.3g over %d ranks: the hook goes from %d to %d "
                      "bits", self._guard["step"] + 1, ratio, size, hook.warmup_bits, hook.bits)

    def _levels(self, params):
        """Collective, every step: each parameter's mean u over the ranks and mean squared gradient norm (floats per
        parameter, at 32 bits). Returns, per parameter, sqrt of how much its second moment's level (bias-corrected)
        moved since the last synchronisation, the largest finite one, whether any moved by more than _DRIFT either
        way (or from 0), and the norm of the
        step's averaged gradient, estimated as sqrt(sum over parameters of mean ||g_rank||^2 / their ratio)."""
        count = len(params)
        sums = torch.stack([self.state[p]["local_exp_avg_sq"].sum() for p in params] +
                           [self.state[p]["local_norm"] for p in params]).to(torch.float32)
        size = self._sum("levels", 32, [sums])
        sums = self._over_shards(sums).tolist()
        factors, moves, norm = [], [], 0.0
        for p, level, square in zip(params, sums[:count], sums[count:]):
            state = self.state[p]
            level /= size * (1.0 - self._groups[p]["betas"][1] ** state["local_steps"])
            moved = level / state["shape_level"] if state["shape_level"] > 0 else math.inf if level > 0 else 1.0
            moves.append(moved)
            factors.append(math.sqrt(moved) if math.isfinite(moved) else 1.0)
            norm += square / size / state["noise_ratio"]
        finite = [m for m in moves if math.isfinite(m)]
        stale = any(not 1.0 / _DRIFT <= m <= _DRIFT for m in moves)  # a level grown from 0 included
        return factors, max(finite, default=1.0), stale, math.sqrt(norm)

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
                    state["previous"] = torch.zeros_like(_local(p), memory_format=torch.preserve_format)
                    if self.policy != "synced":
                        state["exp_avg_sq"] = torch.zeros_like(_local(p), memory_format=torch.preserve_format)
                cohorts.setdefault((state["step"], state["variance_step"]), []).append(p)
            for cohort in cohorts.values():
                for params in _chunks(cohort):
                    states = [self.state[p] for p in params]
                    yield (group, params, [_local(p) for p in params], [_local(p.grad) for p in params], states,
                           [s["previous"] for s in states], [s.get("exp_avg_sq") for s in states])

    def _learns(self, states):
        """Whether the second moment of a cohort learns from g in this step."""
        if self.policy == "synced":
            return False
        return self.variance_steps is None or states[0]["step"] < self.variance_steps

    def _variance_learns(self):
        """Whether this step updates the second moment from g (then g is the averaged gradient to float32 or
        warm-up precision)."""
        if self.policy == "synced":
            return False
        steps = [state["step"] for state in self.state.values() if "step" in state]
        return self.variance_steps is None or (max(steps) if steps else 0) < self.variance_steps

    def _denominators(self, params, states, exp_avg_sqs, beta2, eps):
        """sqrt(v / (1 - beta2^t_v)) + eps per parameter. A frozen v does not change, so after the warm-up these are
        kept (outside the state_dict; remade after a load) and read instead of made again; the synchronised policy
        keeps its own in the state."""
        if self.policy == "synced":  # sqrt(v) = its shape at the last synchronisation times how its level moved
            denominators = torch._foreach_mul([s["root_shape"] for s in states], [self._factors[p] for p in params])
            torch._foreach_add_(denominators, eps)
            return denominators
        key = (states[0]["variance_step"], beta2, eps)
        kept = [self._frozen.get(p) for p in params]
        if all(k is not None and k[0] == key for k in kept):
            return [k[1] for k in kept]
        second = 1.0 - beta2 ** key[0] if key[0] else 1.0
        denominators = torch._foreach_div(exp_avg_sqs, second)
        torch._foreach_sqrt_(denominators)
        torch._foreach_add_(denominators, eps)
        if self.variance_steps is not None and states[0]["step"] >= self.variance_steps:  # frozen from here on
            self._frozen.update((p, (key, d)) for p, d in zip(params, denominators))
        return denominators

    def state_dict(self):
        saved = super().state_dict()
        saved["gradagg"] = {"guard": dict(self._guard), "events": list(self.events), "policy": self.policy,
                            "variance_bits": self.variance_bits}
        return saved

    def load_state_dict(self, state_dict):
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

    def _event(self, step, what):
        what += "; the second moment is averaged again from the next step"
        self.events.append((step, what))
        _log.warning("gradagg.torch.AdamW: step %d: %s", step, what)

    def _check_guard(self, step, square_sum, elements, finite):
        """The guard (module text): returns whether this step must be skipped."""
        guard = self._guard
        rms = math.sqrt(square_sum / elements) if elements and finite else float("nan")
        healthy = math.isfinite(rms) and (guard["count"] < _GUARD_WARMUP or rms <= self.guard * guard["mean"])
        if healthy:
            guard["mean"] = rms if guard["count"] == 0 else _GUARD_DECAY * guard["mean"] + (1 - _GUARD_DECAY) * rms
            guard["count"] += 1
            guard["skips"] = 0
            return False
        guard["skips"] = guard.get("skips", 0) + 1 if not finite else 0
        if guard["skips"] >= _MAX_SKIPS:
            raise RuntimeError(f"gradagg.torch.AdamW: step {step}: the momentum came back non-finite {_MAX_SKIPS} "
                               "times in a row (each time the step was skipped, on every rank): the run has "
                               "diverged; resume from a checkpoint with a lower learning rate or more bits")
        what = ("the momentum is not finite: step skipped" if not finite else
                f"the step's RMS {rms:.3g} is over {self.guard} x its running mean {guard['mean']:.3g}")
        self._event(step, what)
        guard["restart"] = step if finite else step - 1  # a skipped step is taken again, and synchronises
        guard["count"] = 0
        return not finite

    @torch.no_grad()
    def step(self, closure=None):
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
