"""gradagg.torch.AdamW's guard against a run that leaves its path.

The guard (guard=G, default 2.5; 0 turns it off): the root mean square of the bounded step is followed by a running
mean; a step whose RMS is over G times that mean, or a non-finite m, means the run is leaving its path (a loss
spike, a second moment gone stale). The optimizer then skips the step if m is not finite, and restarts the
synchronisation schedule (v is averaged again at once, then after 1, 2, 4, ... steps), the same on every rank since
all of it is computed from identical values. Each event is logged (logger "gradagg") and kept in `events`; the
synchronisations' bytes count in the hook's bits_per_element().
"""
import logging
import math

_GUARD_WARMUP = 10  # steps of the running mean before the guard may fire
_GUARD_DECAY = 0.95
_MAX_SKIPS = 20  # steps in a row with a non-finite momentum: the run is dead, and the optimizer says so
_log = logging.getLogger("gradagg")


class StepGuard:
    """gradagg.torch.AdamW's guard, a part of that optimizer: the running mean and schedule are its `_guard`, the
    events its `events`."""

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
