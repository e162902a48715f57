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
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay))
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            if beta1 != hook_state.momentum or not 0.0 < beta1 < 1.0:
                raise ValueError(f"gradagg.torch: beta1 ({beta1}) must be the hook's momentum "
                                 f"(GradaggState(momentum={beta1})), which is {hook_state.momentum}")
            if not 0.0 <= beta2 < 1.0:
                raise ValueError(f"gradagg.torch: beta2 must be in [0, 1), not {beta2}")

    def _gradients(self):
        """(parameter, group, its state, the recovered averaged gradient g) for every parameter with a p.grad."""
        for group in self.param_groups:
            beta1 = group["betas"][0]
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
                yield p, group, state, p.grad - beta1 * state["previous"]

    def _variance_learns(self):
        """Whether this step updates the second moment (then g is the averaged gradient to float32 or warm-up
        precision)."""
        steps = [state["step"] for state in self.state.values() if "step" in state]
        return self.variance_steps is None or (max(steps) if steps else 0) < self.variance_steps

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        scale = 1.0
        if self.max_grad_norm is not None and self._variance_learns():
            squares = [g.float().square().sum() for _, _, _, g in self._gradients()]
            if squares:
                norm = float(torch.stack(squares).sum().sqrt())
                scale = min(1.0, self.max_grad_norm / (norm + 1e-6))
        for p, group, state, g in self._gradients():
            beta1, beta2 = group["betas"]
            lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
            momentum = p.grad
            changed = scale != 1.0 or (weight_decay and not self.decoupled_weight_decay)
            if scale != 1.0:
                g.mul_(scale)
            if weight_decay and not self.decoupled_weight_decay:
                g.add_(p, alpha=weight_decay)
            if changed:  # what was applied becomes the hook's momentum too
                momentum = g.add(state["previous"], alpha=beta1)
                hook_momentum = self.hook_state.momentum_of(p)
                if hook_momentum is not None:
                    hook_momentum.copy_(momentum)
            state["step"] += 1
            if self.variance_steps is None or state["step"] <= self.variance_steps:
                state["exp_avg_sq"].mul_(beta2).addcmul_(g, g, value=1.0 - beta2)
                state["variance_step"] = state["step"]
            if weight_decay and self.decoupled_weight_decay:
                p.mul_(1.0 - lr * weight_decay)
            first = (1.0 - beta1) / (1.0 - beta1 ** state["step"])
            second = 1.0 - beta2 ** state["variance_step"] if state["variance_step"] else 1.0
            denominator = (state["exp_avg_sq"] / second).sqrt_().add_(eps)
            p.addcdiv_(momentum, denominator, value=-lr * first)
            state["previous"].copy_(momentum)
        return loss


class Adam(AdamW):
    """Adam (weight decay as L2, added to the gradient) on the momentum that gradagg's hook returns; see AdamW."""

    decoupled_weight_decay = False

    def __init__(self, params, hook_state, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False,
                 *, max_grad_norm=None, variance_steps=None):
        super().__init__(params, hook_state, lr, betas, eps, weight_decay, amsgrad, max_grad_norm=max_grad_norm,
                         variance_steps=variance_steps)

