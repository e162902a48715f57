"""FSDP2 with gradagg carrying the exchange between nodes: FSDP2 shards the model over the ranks of a node (a 1-D
device mesh, `fully_shard`), reduce-scatters each module's gradients there, and hands every rank its shard; gradagg
then sums that shard over the nodes, quantized with error feedback, in place of HSDP's float all-reduce.

    import gradagg.torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    gradagg.torch.init_process_group_from_mpi()
    nodes, per_node = world // S, S          # a node's ranks are consecutive, as init_device_mesh lays them out
    mesh = init_device_mesh("cuda", (nodes, per_node), mesh_dim_names=("node", "shard"))["shard"]
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    state = gradagg.torch.FSDPGradaggState(per_node, bits=2, momentum=0.9).attach(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)   # momentum 0: the hook carries it
    # or Adam's pairing, as under DDP (each node's mean gradient stands for a rank's own; see gradagg.torch.adamw):
    optimizer = gradagg.torch.AdamW(model.parameters(), state, lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)

Each `fully_shard` module with parameters gets FSDP2's all-reduce hook (`FSDPModule.set_all_reduce_hook`; PyTorch 2.8 or
later, for the force-sum reduction below). FSDP2 is told to hand over the plain sum over the node
(`set_force_sum_reduction_for_comms(True)`) and to divide nothing afterwards (`set_gradient_divide_factor(1.0)`); the
hook divides by the node's ranks, adds the carried momentum as the DDP hook does (beta * m + g), sums over the nodes
with one gradagg.ShardAggregator per module and shard size (each parameter's shard its own tensor, so its own
quantization buckets; the library's exchange among the ranks that hold the same shard, one per node, with a failure
on any rank raised on all), divides by the nodes, and keeps the result as the new momentum. So at 32 bits the
gradient is bitwise what a float all-reduce over those ranks gives. Frozen parameters (requires_grad False) take no
part; with momentum or gradagg.torch.AdamW every trainable parameter of a module must get a gradient every step.

The width: `bits=`, else GRADAGG_BITS, else gradagg.torch.DEFAULT_BITS (2; no early phase, unlike the DDP hook's
default). A shard whose sum is not finite (an AMP overflow) comes back non-finite, and that step moves no module's
momentum (AMP's GradScaler itself is not supported here yet: bf16 autocast needs none). The communicator is mpi4py's
(`comm=`, or MPI_COMM_WORLD), its consecutive groups of `shard_size` ranks the nodes. HSDP (a 2-D mesh) is refused:
FSDP2 would run its own all-reduce between the nodes before the hook. Checkpoints: each rank saves its own state_dict()
of this state and of the optimizer (gradagg.torch.AdamW's state is the rank's local shards) with torch.save.
"""
import torch

import gradagg
from gradagg.options import make_options
from .common import (HookTraffic, checkpoint_residuals, hook_options, refuse_distributed_checkpoint, result_options,
                     same_settings)


def shard_group_mismatch(members, rank, shard_size):
    """Why FSDP2's shard group cannot be gradagg's node of `rank`, or None where it can: `members` are the ranks, in
    gradagg's communicator, of the group's members in the group's order; gradagg's node is the consecutive block of
    `shard_size` ranks that holds `rank`, in order (gradagg sums local rank i's shard with the other nodes' shard i, so
    another layout would sum unrelated shards)."""
    node = rank // shard_size
    expected = list(range(node * shard_size, (node + 1) * shard_size))
    if list(members) == expected:
        return None
    return (f"gradagg.torch: rank {rank}: FSDP2's shard group holds ranks {list(members)} of gradagg's communicator, "
            f"but gradagg's node of this rank is ranks {expected}: shard over consecutive ranks, numbered in torch as "
            "in MPI (init_process_group_from_mpi, and init_device_mesh's row-by-row layout)")


class FSDPGradaggState(HookTraffic):
    """The FSDP2 hook's state: the shard group's size, gradagg options (bits, ...), the momentum, and one
    ShardAggregator and momentum buffer per FSDP2 module and shard size. Collective over `comm` (or
    MPI_COMM_WORLD)."""

    def __init__(self, shard_size, momentum=0.0, comm=None, **options):
        from mpi4py import MPI  # gradagg takes mpi4py communicators

        world = MPI.COMM_WORLD if comm is None else comm
        if not isinstance(shard_size, int) or shard_size < 1 or world.size % shard_size:
            raise ValueError(f"gradagg.torch: rank {world.rank}: shard_size must divide the {world.size} ranks, not "
                             f"{shard_size!r}")
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"gradagg.torch: rank {world.rank}: momentum must be in [0, 1), not {momentum}")
        super().__init__()
        options = hook_options(options)  # the DDP hook's width rule
        if "ranks_per_node" in options:
            raise ValueError(f"gradagg.torch: rank {world.rank}: the node is FSDP2's shard group, shard_size ranks "
                             "(leave ranks_per_node out)")
        self.shard_size = shard_size
        self.rank = world.rank
        # init_device_mesh lays a (nodes, shard) mesh out row by row: a node's ranks are consecutive.
        self.comm = world
        self.nodes = world.size // shard_size
        self.momentum = momentum
        self.options = dict(options, ranks_per_node=shard_size)
        self.bits = make_options(self.options).bits  # as it takes effect: given, GRADAGG_BITS, default
        self._modules = 0  # FSDP2 modules hooked so far, over every attach: each one's index keys its Aggregators
        self.aggregators = {}
        self.momenta = {}
        self.calls = {}
        self._restore = None  # load_state_dict's, handed to each module's Aggregator at its first call
        self._pending = {}  # this step's new momenta, committed after its last module
        self._shard_group = None
        # gradagg.torch.AdamW's side of the pairing, as GradaggState offers it: called with (parameters, this node's
        # mean gradient of each parameter's local shard, None) before a module's shard is sent
        self.observers = []
        self.warmup_steps = 0
        self._layout = {}  # parameter -> (module index, offset in the module's shard, its local shard's shape)
        self._keys = {}  # module index -> the key of its momentum

    def attach(self, root):
        """Sets the hook on every FSDP2 module under `root` (itself included) that owns parameters. Returns self."""
        try:
            from torch.distributed.fsdp import FSDPModule
        except ImportError:
            FSDPModule = None  # noqa: N806
        if FSDPModule is None or not hasattr(FSDPModule, "set_force_sum_reduction_for_comms"):
            raise RuntimeError(f"gradagg.torch: rank {self.rank}: FSDP2's all-reduce hook with a plain sum needs "
                               f"PyTorch 2.8 or later, not {torch.__version__}")
        first = self._modules
        for module in root.modules():
            if not isinstance(module, FSDPModule):
                continue
            group = module._get_fsdp_state()._fsdp_param_group  # noqa: SLF001 (FSDP2 keeps it private)
            if group is None:  # a module whose parameters all belong to its children
                continue
            if group._is_hsdp:  # noqa: SLF001
                raise ValueError(f"gradagg.torch: rank {self.rank}: the module is sharded on a 2-D (HSDP) mesh; "
                                 "gradagg replaces HSDP's all-reduce between the nodes: shard on the node's 1-D mesh")
            width = group.mesh_info.shard_mesh_size
            if width != self.shard_size:
                raise ValueError(f"gradagg.torch: rank {self.rank}: the module is sharded over {width} ranks, the "
                                 f"state over {self.shard_size}")
            if group.mesh_info.shard_process_group is not self._shard_group:
                self._check_node(group.mesh_info.shard_process_group)
            self._shard_group = group.mesh_info.shard_process_group  # the node: where an overflow is agreed
            module.set_force_sum_reduction_for_comms(True)
            module.set_gradient_divide_factor(1.0)
            # FSDP2 reduce-scatters the parameters that got a gradient: frozen ones never do
            trainable = [p for p in group.fsdp_params if p.sharded_param.requires_grad]
            sizes = [p.padded_sharded_param_size.numel() for p in trainable]
            parameters = [p.sharded_param for p in trainable]
            offsets = [sum(sizes[:i]) for i in range(len(sizes))]
            for parameter, offset in zip(parameters, offsets):  # a shard's own elements come first, padding after
                self._layout[parameter] = (self._modules, offset, parameter.to_local().shape)
            module.set_all_reduce_hook(self._hook(self._modules, sizes, parameters))
            self._modules += 1
        if self._modules == first:
            raise ValueError(f"gradagg.torch: rank {self.rank}: no fully_shard module with parameters under the root")
        return self

    def state_dict(self):
        """What the hook owes between steps, for torch.save beside the model and optimizer (each rank saves its own):
        every module's carried quantization error, momentum and call count, and the bytes sent. Call it between
        steps."""
        refuse_distributed_checkpoint("gradagg.torch.FSDPGradaggState")
        if self._pending:
            self._commit()
        modules = []
        for key in sorted(self.calls, key=lambda k: (k[0], k[1])):
            momentum = self.momenta.get(key)
            modules.append({"module": key[0], "elements": key[1], "dtype": str(key[2]), "calls": self.calls[key],
                            "residuals": checkpoint_residuals(self.aggregators.get(key)),
                            "momentum": None if momentum is None else momentum.cpu().clone()})
        return {"format": 1, "settings": self._settings(), "rank": self.rank, "modules": modules,
                "bytes_sent": self.bytes_sent, "float_bytes": self.float_bytes}

    def _check_node(self, shard_group):
        """Collective over the state's communicator: every rank learns whether any rank's shard group is not its
        gradagg node (shard_group_mismatch), and all refuse together, none left waiting in an exchange."""
        from mpi4py import MPI  # gradagg takes mpi4py communicators

        members = [None] * self.shard_size
        torch.distributed.all_gather_object(members, self.rank, group=shard_group)
        mine = shard_group_mismatch(members, self.rank, self.shard_size)
        first = self.comm.allreduce(self.comm.size if mine is None else self.rank, op=MPI.MIN)
        if first < self.comm.size:
            raise ValueError(mine or f"gradagg.torch: rank {self.rank}: rank {first}'s FSDP2 shard group is not its "
                             "gradagg node (its own error says how)")

    def load_state_dict(self, saved):
        """Resumes from state_dict() of this rank of an earlier run with the same settings and ranks: call it before
        the first step. Each module's next call starts from the saved error and momentum, so the run goes on bitwise
        as the saved one would have."""
        refuse_distributed_checkpoint("gradagg.torch.FSDPGradaggState")
        if not isinstance(saved, dict) or saved.get("format") != 1:
            raise ValueError(f"gradagg.torch: rank {self.rank}: load_state_dict takes what FSDPGradaggState."
                             "state_dict() returned")
        if not same_settings(saved["settings"], self._settings(), self.options) or saved["rank"] != self.rank:
            raise ValueError(f"gradagg.torch: rank {self.rank}: the checkpoint is rank {saved['rank']}'s with "
                             f"{saved['settings']}, not this state's {self._settings()}")
        if self.calls:
            raise ValueError(f"gradagg.torch: rank {self.rank}: load_state_dict must come before the first step")
        self._restore = {(m["module"], m["elements"], m["dtype"]): m for m in saved["modules"]}
        self.bytes_sent, self.float_bytes = saved["bytes_sent"], saved["float_bytes"]

    def _settings(self):
        return {"shard_size": self.shard_size, "nodes": self.nodes, "momentum": self.momentum, "bits": self.bits,
                "result_options": result_options(self.options)}

    def momentum_of(self, parameter):
        """The hook's momentum of `parameter`'s local shard (a view of its module's), or None before its first step:
        what the next step adds to."""
        index, offset, shape = self._layout.get(parameter, (None, 0, None))
        momentum = self.momenta.get(self._keys.get(index))
        return None if momentum is None else momentum[offset:offset + shape.numel()].view(shape)

    def sum_over_shards(self, tensor):
        """Collective over the node's ranks (FSDP2's shard group): `tensor` summed in place, in local-rank order, so
        that every node gets the same bits whatever its collective's algorithm (the ranks' decisions hang on them).
        gradagg.torch.AdamW sums its per-parameter figures so, as each rank holds a part of every parameter."""
        if self.shard_size > 1:
            if self._shard_group is None:
                raise RuntimeError(f"gradagg.torch: rank {self.rank}: the FSDP2 state is closed or not attached")
            pieces = [torch.empty_like(tensor) for _ in range(self.shard_size)]
            torch.distributed.all_gather(pieces, tensor.contiguous(), group=self._shard_group)
            tensor.copy_(torch.stack(pieces).sum(0))
        return tensor

    def flush(self):
        """Collective over the node: commits the last step's momenta if a module of the model got no gradient in it
        (its hook never ran). gradagg.torch.AdamW calls it before it steps."""
        if self._pending:
            self._commit()

    def make_aggregator(self, **options):
        """Collective: an aggregator of this state's topology that sums each rank's shard across the nodes
        (gradagg.torch.AdamW's synchronisations use it)."""
        return gradagg.ShardAggregator(comm=self.comm, **dict(self.options, **options))

    def close(self):
        """Frees the aggregators (local)."""
        for aggregator in self.aggregators.values():
            aggregator.close()
        self.aggregators.clear()
        self._shard_group = None

    def _hook(self, index, sizes, parameters):
        def hook(shard):
            # The key is the same on every member of the communicator (same module, same shard size), and FSDP2
            # reaches the modules in one order everywhere, so Aggregators are created collectively in step.
            key = (index, shard.numel(), shard.dtype, shard.device)
            aggregator = self.aggregators.get(key)
            if aggregator is None:
                aggregator = self.aggregators[key] = self.make_aggregator()
                self._resume(key, shard, aggregator)
            if sum(sizes) != shard.numel() and (self.observers or self.momentum > 0.0):
                raise ValueError(f"gradagg.torch: rank {self.rank}: module {index}'s shard has {shard.numel()} "
                                 f"elements, its trainable parameters' {sum(sizes)}: one got no gradient this step "
                                 "(unused?); the hook's momentum and gradagg.torch.AdamW need every trainable "
                                 "parameter of a module to get one")
            shard.div_(self.shard_size)  # the node's mean: exact when the node's ranks are a power of two
            if self.observers:
                views = [shard[offset:offset + shape.numel()]
                         for _, offset, shape in (self._layout[p] for p in parameters)]
                for observe in self.observers:
                    observe(parameters, views, None)
            momentum = None
            if self.momentum > 0.0:
                if key in self._pending:  # a new step, and the last one's momenta still wait: it had fewer modules
                    self._commit()
                momentum = self.momenta.get(key)
                if momentum is None:
                    momentum = self.momenta[key] = torch.zeros_like(shard)
                self._keys[index] = key
                shard.add_(momentum, alpha=self.momentum)
            tensors = list(shard.split(sizes)) if sum(sizes) == shard.numel() else [shard]
            aggregator.aggregate(tensors)
            shard.div_(self.nodes)
            if momentum is not None:  # kept aside until the step's last module: one overflow keeps them all
                self._pending[key] = shard.clone()
                if len(self._pending) == self._modules:
                    self._commit()
            self.calls[key] = self.calls.get(key, 0) + 1
            self._count(aggregator)
        return hook

    def _commit(self):
        """The step's new momenta, once its modules are through: all of them if every shard came back finite, none
        if one did not (an AMP overflow, whose step the scaler skips), as the DDP hook does. The same on every rank,
        since the nodes' sums come back alike and the node's ranks agree on their shards here."""
        finite = torch.stack([torch.isfinite(new).all() for new in self._pending.values()]).all().float()
        if self.shard_size > 1:
            torch.distributed.all_reduce(finite, op=torch.distributed.ReduceOp.MIN, group=self._shard_group)
        if bool(finite):
            for key, new in self._pending.items():
                self.momenta[key].copy_(new)
        self._pending.clear()

    def _resume(self, key, shard, aggregator):
        if not self._restore:
            return
        saved = self._restore.pop((key[0], key[1], str(key[2])), None)
        if saved is None:
            other = [k for k in self._restore if k[0] == key[0]]
            if other:  # the module was saved with another shard: its carried error would be lost
                raise ValueError(f"gradagg.torch: rank {self.rank}: module {key[0]} was saved with {other[0][1]} "
                                 f"elements of {other[0][2]}, and now has {key[1]} of {key[2]}")
            return
        if saved["residuals"] is not None:
            aggregator.import_residuals(saved["residuals"])
        if saved["momentum"] is not None:
            self.momenta[key] = saved["momentum"].to(shard.device, shard.dtype)
        self.calls[key] = saved["calls"]
