"""gradagg.torch.AdamW's second moment v: where it comes from depends on what crosses the nodes (adamw.py steps
with it):

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
"""
import logging
import math

import torch

import gradagg

_DRIFT = 4.0  # a second moment's level that moved this many times either way since it was averaged is stale
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


def synchronises(step, restart, interval):
    """Whether the ranks average their second moments at optimizer step `step` (counted from 1): 1, 2, 4, ... steps
    after the last restart, then every `interval` steps."""
    since = step - restart
    return since >= 1 and ((since & (since - 1) == 0 and since <= interval) or since % interval == 0)


def local_shard(tensor):
    """A DTensor's local shard (FSDP2), the tensor itself otherwise; in place it changes the DTensor too."""
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def second_moment_policy(hook_state, second_moment, variance_steps):
    """Where v comes from: "exact" (32 bits: from g, every step), "frozen" (from g for variance_steps, then frozen),
    "synced" (every rank's own gradient, averaged at growing intervals). Returns the policy and its variance_steps
    (None but for "frozen")."""
    if second_moment not in (None, "frozen", "synced"):
        raise ValueError(f"gradagg.torch: second_moment must be 'frozen', 'synced' or None, not {second_moment!r}")
    if second_moment == "synced" and variance_steps is not None:
        raise ValueError("gradagg.torch: variance_steps is the frozen second moment's; not with 'synced'")
    automatic = getattr(hook_state, "warmup", None) == "auto"  # an early phase that this optimizer ends
    if not hook_state.bits < 32:
        return "exact", None
    if second_moment == "frozen" or (second_moment is None and (
            variance_steps is not None or (hook_state.warmup_steps > 0 and not automatic))):
        if automatic:
            raise ValueError("gradagg.torch: the hook's automatic early phase (warmup_steps='auto') is ended by "
                             "the synchronised second moment, not a frozen one (second_moment='frozen' or "
                             "variance_steps=N): give the hook warmup_steps=N for that")
        variance_steps = hook_state.warmup_steps if variance_steps is None else variance_steps
        if not variance_steps >= 1:  # frozen at once: every denominator eps, sign descent at max_update
            raise ValueError("gradagg.torch: a frozen second moment is learnt over the first steps, and there are "
                             f"none ({variance_steps}): give the hook warmup_steps=N or the optimizer "
                             "variance_steps=N (N >= 1), or take the synchronised second moment (second_moment="
                             "'synced', the default without a warm-up)")
        return "frozen", variance_steps
    return "synced", None


class SecondMoment:
    """gradagg.torch.AdamW's second moment, a part of that optimizer (its state is the optimizer's): the rank's own
    second moment and its synchronisations (policy "synced"), and the denominators of every policy."""

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
            state["root_shape"] = root.mul_(factor).view_as(local_shard(p)).to(p.dtype)
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

    # --- whether v learns from g, and the denominators (every policy) ---

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
