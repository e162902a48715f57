"""Adam and AdamW for gradagg's DDP hook: 1-bit Adam's mechanism (docs/DESIGN.md, "Momentum and Adam").

    state = gradagg.torch.GradaggState(bits=1, momentum=0.9, warmup_steps=120, warmup_bits=4)
    model.register_comm_hook(state, gradagg.torch.comm_hook)
    optimizer = gradagg.torch.AdamW(model.parameters(), state, lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1,
                                    max_grad_norm=1.0)

The hook aggregates Adam's first moment rather than the gradient: each rank sends beta1 * m + g, and every rank gets
back the new m (its p.grad), identical everywhere. These optimizers take that m, recover the step's averaged gradient
as g = m - beta1 * m_previous, and

  - update the second moment v from g during the hook's warm-up (its first warmup_steps steps, at warmup_bits), then
    freeze it: after the warm-up g is a 1-bit reconstruction, whose square says little about the true variance;
  - step with Adam's bias-corrected first moment (1 - beta1) m / (1 - beta1^t) over sqrt(v / (1 - beta2^t_v)) + eps;
  - AdamW: decay the weights by lr * weight_decay first; Adam: add weight_decay * p to g (L2), as torch's Adam does;
  - max_grad_norm: while the second moment learns (the warm-up, or always at 32 bits), scale g so the global norm of
    the averaged gradient is at most that, as clip_grad_norm_ before torch's AdamW would (clipping p.grad, which holds
    m here, would clip the momentum instead). After the warm-up g is a 1-bit reconstruction whose norm measures the
    quantization error more than the gradient, and clipping by it starves the momentum (a 2-layer GPT, 300 steps:
    validation 2.74 clipped against 2.45 not), so no clipping is applied there.

Where clipping or L2 changes g, the optimizer writes m = beta1 * m_previous + g back into the hook's momentum, so the
next step builds on what was applied. Every rank computes the same numbers from the same m, so parameters stay
identical. The state (step, previous m, v) is the optimizer's state_dict. Parameter groups take lr, betas, eps and
weight_decay as torch's do; every group's beta1 must be the hook's momentum.
"""
import torch


_CPU_CHUNK = 1 << 18  # elements


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


class AdamW(torch.optim.Optimizer):
    """AdamW on the momentum that gradagg's hook returns (see the module's text). `hook_state` is the GradaggState
    registered with the model's comm hook; its momentum must equal beta1."""

    decoupled_weight_decay = True

    def __init__(self, params, hook_state, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False,
                 *, max_grad_norm=None, variance_steps=None):
        if amsgrad:
            raise ValueError("gradagg.torch: amsgrad is not supported (the second moment is frozen after the warm-up, "
                             "so its running maximum has no role)")
        if not lr > 0.0 or not eps > 0.0 or weight_decay < 0.0:
            raise ValueError(f"gradagg.torch: need lr > 0, eps > 0, weight_decay >= 0 (got {lr}, {eps}, "
                             f"{weight_decay})")
        if max_grad_norm is not None and not max_grad_norm > 0.0:
            raise ValueError(f"gradagg.torch: max_grad_norm must be > 0 or None, not {max_grad_norm}")
        if hook_state.bits < 32 and hook_state.warmup_steps == 0 and variance_steps is None:
            raise ValueError(f"gradagg.torch: a {hook_state.bits}-bit hook needs a warm-up (GradaggState(warmup_steps="
                             "N, warmup_bits=4 or 32)) for the second moment to be learnt from, or variance_steps")
        self.hook_state = hook_state
        self.max_grad_norm = max_grad_norm
        # The second moment learns from the warm-up's gradients and is frozen after them; at 32 bits, never frozen.
        if variance_steps is None and hook_state.bits < 32:
            variance_steps = hook_state.warmup_steps
        self.variance_steps = variance_steps
        self._frozen = {}  # parameter -> ((variance step, beta2, eps), its denominator), once v is frozen
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay))
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            if beta1 != hook_state.momentum or not 0.0 < beta1 < 1.0:
                raise ValueError(f"gradagg.torch: beta1 ({beta1}) must be the hook's momentum "
                                 f"(GradaggState(momentum={beta1})), which is {hook_state.momentum}")
            if not 0.0 <= beta2 < 1.0:
                raise ValueError(f"gradagg.torch: beta2 must be in [0, 1), not {beta2}")

    def _cohorts(self):
        """The parameters with a p.grad, in lists that step together: per parameter group and step count (one list
        per group unless some parameters missed steps). Yields the group and lists of the parameters, their p.grad
        (the hook's m), their states, previous m and second moments."""
        for group in self.param_groups:
            cohorts = {}
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise ValueError("gradagg.torch: sparse gradients are not supported")
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["variance_step"] = 0
                    state["previous"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                cohorts.setdefault((state["step"], state["variance_step"]), []).append(p)
            for cohort in cohorts.values():
                for params in _chunks(cohort):
                    states = [self.state[p] for p in params]
                    yield (group, params, [p.grad for p in params], states, [s["previous"] for s in states],
                           [s["exp_avg_sq"] for s in states])

    def _learns(self, states):
        """Whether the second moment of a cohort learns in this step."""
        return self.variance_steps is None or states[0]["step"] < self.variance_steps

    def _variance_learns(self):
        """Whether this step updates the second moment (then g is the averaged gradient to float32 or warm-up
        precision)."""
        steps = [state["step"] for state in self.state.values() if "step" in state]
        return self.variance_steps is None or (max(steps) if steps else 0) < self.variance_steps

    def _denominators(self, params, states, exp_avg_sqs, beta2, eps):
        """sqrt(v / (1 - beta2^t_v)) + eps per parameter. A frozen v does not change, so after the warm-up these are
        kept (outside the state_dict; remade after a load) and read instead of made again."""
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

    def load_state_dict(self, state_dict):
        self._frozen.clear()
        super().load_state_dict(state_dict)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        cohorts = list(self._cohorts())
        learns = self._variance_learns()

        def gradient(group, momenta, states, previous):
            """g = m - beta1 m_previous, the step's averaged gradient: needed while v learns, or to add L2 to."""
            if self._learns(states) or (group["weight_decay"] and not self.decoupled_weight_decay):
                return torch._foreach_sub(momenta, torch._foreach_mul(previous, group["betas"][0]))
            return None

        scale, gradients = 1.0, None
        if self.max_grad_norm is not None and learns:  # the norm needs every g first
            gradients = [gradient(group, momenta, states, previous)
                         for group, _, momenta, states, previous, _ in cohorts]
            squares = [g.float().square().sum() for gs in gradients for g in gs]
            if squares:
                norm = float(torch.stack(squares).sum().sqrt())
                scale = min(1.0, self.max_grad_norm / (norm + 1e-6))
        for index, (group, params, momenta, states, previous, exp_avg_sqs) in enumerate(cohorts):
            beta1, beta2 = group["betas"]
            lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
            l2 = bool(weight_decay) and not self.decoupled_weight_decay
            g = gradients[index] if gradients is not None else gradient(group, momenta, states, previous)
            if scale != 1.0:
                torch._foreach_mul_(g, scale)
            if l2:
                torch._foreach_add_(g, params, alpha=weight_decay)
            if scale != 1.0 or l2:  # what was applied becomes the hook's momentum too
                momenta = torch._foreach_add(g, previous, alpha=beta1)
                for p, momentum in zip(params, momenta):
                    hook_momentum = self.hook_state.momentum_of(p)
                    if hook_momentum is not None:
                        hook_momentum.copy_(momentum)
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
                torch._foreach_mul_(params, 1.0 - lr * weight_decay)
            first = (1.0 - beta1) / (1.0 - beta1 ** step)
            torch._foreach_addcdiv_(params, momenta, self._denominators(params, states, exp_avg_sqs, beta2, eps),
                                    value=-lr * first)
            for old, momentum in zip(previous, momenta):
                old.copy_(momentum)
        return loss


class Adam(AdamW):
    """Adam (weight decay as L2, added to the gradient) on the momentum that gradagg's hook returns; see AdamW."""

    decoupled_weight_decay = False

    def __init__(self, params, hook_state, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False,
                 *, max_grad_norm=None, variance_steps=None):
        super().__init__(params, hook_state, lr, betas, eps, weight_decay, amsgrad, max_grad_norm=max_grad_norm,
                         variance_steps=variance_steps)

