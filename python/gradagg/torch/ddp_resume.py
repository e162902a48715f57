"""The DDP hook's first step after GradaggState.load_state_dict: the saved run's buckets, aggregated as it had them."""
import torch

from . import ddp_bucket


def resume(state):
    """The first iteration after load_state_dict, at its last bucket: DDP's buckets are its first ones, not the
    saved run's (rebuilt after its first iteration), so each saved bucket is aggregated on its parameters' gradients
    wherever they lie now, by an Aggregator that takes over the saved one's residuals, in the saved order. From the
    next iteration DDP's rebuilt buckets are those again."""
    saved, stash = state._restore, state._stash
    state._restore, state._stash = None, []
    gradients = {}
    for bucket, _ in stash:
        parameters = list(bucket.parameters())
        views = ddp_bucket.tensors_of(bucket)
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
                             "carried error belongs to one place in one topology: resume on the same one, or load it "
                             "with residuals='reset' to keep the momentum and start the carried error afresh.")
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
            for parameter, view in zip(parameters, ddp_bucket.cut_as(momentum, views)):
                state.momentum_views[parameter] = view.view(parameter.shape)
        if momentum is not None:
            ddp_bucket.follow_loss_scale(state, key, momentum)
        pending, finish = ddp_bucket.start(state, aggregator, parameters, views, momentum,
                                           last=entry is saved["buckets"][-1])
        pending.wait()  # one call at a time, in the saved order: this step only
        state._count(aggregator)
        finish()
    for bucket, future in stash:
        future.set_result(bucket.buffer())
