"""A byte-level GPT trained data-parallel with PyTorch's DDP and AdamW, the gradient exchange chosen on the command
line: DDP's own allreduce, PyTorch's bf16-compression or PowerSGD hook, or gradagg's hook at any width (with
gradagg.torch.AdamW, 1-bit Adam's mechanism, or torch's AdamW).

    mpirun -np 2 python3 examples/pytorch/train_gpt.py --exchange ddp
    mpirun -np 2 python3 examples/pytorch/train_gpt.py --exchange gradagg   # the hook's defaults
    mpirun -np 4 python3 examples/pytorch/train_gpt.py --shard 2            # FSDP2 over each node's 2 ranks
    mpirun -np 4 python3 examples/pytorch/train_gpt.py --exchange local --local-steps 64   # DiLoCo-style, 4 bits

With --shard N (PyTorch 2.8+, mpi4py) the model is sharded with FSDP2 over each N consecutive ranks (a node) instead
of DDP: gradagg's FSDP2 state carries the exchange between the nodes, with gradagg.torch.AdamW on the shards;
--exchange ddp is then HSDP (FSDP2 on the (nodes, N) mesh: reduce-scatter inside, float all-reduce between) with
torch's AdamW and clip_grad_norm_, and --exchange bf16 the same HSDP reducing in bfloat16 (FSDP2's
MixedPrecisionPolicy(reduce_dtype=torch.bfloat16), parameters kept in float32).

With --exchange local, DDP (torch's AdamW and clip_grad_norm_, DDP's recipe) runs inside each node every step, and
gradagg.torch.LocalSteps synchronises the nodes every --local-steps steps: the outer gradient at --outer-bits (4 by
default; 32 is DiLoCo's float32) through an outer Nesterov SGD (--outer-lr, --outer-momentum), in --fragments
fragments each applied --delay steps after it was sent (Streaming DiLoCo); the nodes synchronise once more before the
last evaluation where the last step did not.

Data: the Python standard library's own sources (every *.py file at the top of the running interpreter's stdlib
folder, sorted by name), read as bytes; nothing is downloaded. The first 90% is training text, the last 10% the
validation text. Each rank draws its own windows (seeded by --seed and its rank). With --corpus FILE (made by
examples/pytorch/make_corpus.py) the training text is read in order instead, no byte twice: step s of rank r takes
the windows (s * ranks + r) * batch ... + batch - 1, each --context bytes on from the last, so every arm of a
comparison reads the same text at the same step, whatever its number of ranks; the run refuses to start when the
training text is too short for it. Loss is in nats per byte. The
recipe: AdamW, betas 0.9 / 0.95, weight decay 0.1 on matrices only, linear warm-up over --lr-warmup steps then
cosine to 10% of --lr, gradient clipping at --clip, bf16 autocast on GPUs. Rank 0 prints a line per evaluation and,
with --csv, appends rows (step, seconds, validation loss, bits per element sent so far) to a CSV file; --json writes
a summary (with the bytes each rank sent per step). With --target-loss the run stops at the first evaluation that
reaches it, with --time-limit at the first one past that time: the seconds are training time, earlier evaluations
included (examples/pytorch/time_to_target.sh).
"""
import argparse
import contextlib
import glob
import json
import math
import os
import sys
import sysconfig
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import gradagg
import gradagg.torch


def warmup_steps(text):
    """--warmup-steps: 'auto' or a whole number >= 0."""
    if text == "auto":
        return text
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"'auto' or a whole number >= 0, not {text!r}")
    return int(text)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exchange", choices=["ddp", "bf16", "powersgd", "gradagg", "local"], default="gradagg",
                        help="local: DDP inside each node, gradagg.torch.LocalSteps across the nodes")
    parser.add_argument("--bits", type=int, default=None,
                        help="gradagg: bits per element across nodes (default: the hook's, 1 bit behind an automatic "
                             "early phase at 2 bits that gradagg's AdamW ends; FSDP2's hook: 2 bits)")
    parser.add_argument("--optimizer", choices=["gradagg", "torch"], default="gradagg",
                        help="gradagg: gradagg.torch.AdamW (the hook carries the first moment); torch: torch's AdamW "
                             "behind a plain hook (refused below 32 bits unless --unchecked)")
    parser.add_argument("--warmup-steps", type=warmup_steps, default=None,
                        help="gradagg: steps sent at --warmup-bits first, or 'auto' (until gradagg's AdamW measures "
                             "the ranks' gradients noisy enough; the default where --bits is not given, else 0). "
                             "gradagg's AdamW learns the second moment from N steps and freezes it; with 'auto' or "
                             "0 each rank's own second moment is averaged over the ranks at growing intervals "
                             "(python/gradagg/torch/second_moment.py)")
    parser.add_argument("--warmup-bits", type=int, default=None,
                        help="gradagg: width of the warm-up (default: 2 for 'auto', 32 for N steps)")
    parser.add_argument("--bucket-size", type=int, default=None,
                        help="gradagg and local: elements per quantization bucket (default: the library's, or "
                             "GRADAGG_BUCKET)")
    parser.add_argument("--second-moment", choices=["frozen", "synced"], default=None,
                        help="gradagg's AdamW: where the second moment comes from (default: frozen after a warm-up, "
                             "synced without one)")
    parser.add_argument("--variance-steps", type=int, default=None,
                        help="gradagg's AdamW: learn the second moment from the hook's output for this many steps, "
                             "then freeze it (the older policy)")
    parser.add_argument("--variance-interval", type=int, default=64,
                        help="gradagg's AdamW: most steps between averagings of the second moment")
    parser.add_argument("--variance-bits", type=int, default=4, help="gradagg's AdamW: width of those averagings")
    parser.add_argument("--max-update", type=float, default=None,
                        help="gradagg's AdamW: bound on an element's step over lr (default: Adam's own bound)")
    parser.add_argument("--guard", type=float, default=2.5,
                        help="gradagg's AdamW: a step whose RMS exceeds this times its running mean restarts the "
                             "second moment's averaging (0: off)")
    parser.add_argument("--unchecked", action="store_true",
                        help="gradagg: skip the hook's optimizer check (to measure torch's AdamW behind it)")
    parser.add_argument("--shard", type=int, default=0,
                        help="FSDP2 over each N consecutive ranks instead of DDP (gradagg or ddp: HSDP); 0: DDP")
    parser.add_argument("--local-steps", type=int, default=64, help="local: inner steps between synchronisations")
    parser.add_argument("--outer-bits", type=int, default=None,
                        help="local: bits of the outer gradient (default LocalSteps', 4; 32: float32, DiLoCo's)")
    parser.add_argument("--outer-lr", type=float, default=0.7, help="local: the outer Nesterov SGD's learning rate")
    parser.add_argument("--outer-momentum", type=float, default=0.9, help="local: its momentum")
    parser.add_argument("--outer-momentum-inside", action="store_true",
                        help="local: the outer momentum summed inside the exchange (gradagg.torch.NesterovInside)")
    parser.add_argument("--fragments", type=int, default=1, help="local: fragments synchronised in turn (streaming)")
    parser.add_argument("--delay", type=int, default=0, help="local: steps an exchange runs behind the inner steps")
    parser.add_argument("--powersgd-rank", type=int, default=4)
    parser.add_argument("--powersgd-start", type=int, default=120, help="PowerSGD: allreduce steps before it starts")
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--heads", type=int, default=6)
    parser.add_argument("--context", type=int, default=256, help="bytes per sequence")
    parser.add_argument("--batch", type=int, default=32, help="sequences per rank per step")
    parser.add_argument("--steps", type=int, default=1200)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--lr-warmup", type=int, default=60, help="steps of linear learning-rate warm-up")
    parser.add_argument("--beta1", type=float, default=0.9)
    parser.add_argument("--beta2", type=float, default=0.95)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--clip", type=float, default=1.0, help="global gradient-norm clipping (0: none)")
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--eval-batches", type=int, default=20)
    parser.add_argument("--target-loss", type=float, default=None,
                        help="stop at the first evaluation whose validation loss is at or below this (time to target)")
    parser.add_argument("--time-limit", type=float, default=None,
                        help="stop at the first evaluation after this many seconds of training (rank 0's clock)")
    parser.add_argument("--backend", choices=["gloo", "nccl"], default="gloo",
                        help="torch.distributed's backend: gloo lets ranks share a GPU; nccl, one GPU per rank, makes "
                             "DDP's own allreduce fast (a baseline at 85M took 1.46 s a step over gloo)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data", default=None, help="a folder of *.py files (default: this Python's stdlib)")
    parser.add_argument("--corpus", default=None,
                        help="a file of text (examples/pytorch/make_corpus.py), read in order, no byte twice")
    parser.add_argument("--threads", type=int, default=0, help="torch threads per rank on CPUs (0: torch's choice)")
    parser.add_argument("--csv", default=None, help="append rank 0's evaluation rows to this CSV file")
    parser.add_argument("--json", default=None, help="write rank 0's summary to this JSON file")
    parser.add_argument("--label", default=None, help="the run's name in the CSV and JSON (default: from the flags)")
    args = parser.parse_args(argv)
    if min(args.layers, args.dim, args.heads, args.context, args.batch, args.steps, args.eval_every,
           args.eval_batches) < 1 or args.dim % args.heads:
        parser.error("sizes and counts must be positive, and --dim a multiple of --heads")
    if args.lr <= 0 or args.lr_warmup < 0 or args.clip < 0:
        parser.error("--lr must be > 0; --lr-warmup and --clip >= 0")
    if any(value is not None and value <= 0 for value in (args.target_loss, args.time_limit)):
        parser.error("--target-loss and --time-limit must be > 0")
    unsharded = (args.optimizer != "gradagg" or args.warmup_steps is not None or args.warmup_bits is not None or
                 args.second_moment is not None or
                 args.variance_steps is not None)  # what the FSDP2 path does not take
    if args.shard < 0 or (args.shard and (args.exchange not in ("gradagg", "ddp", "bf16") or
                                          (args.exchange == "gradagg" and unsharded))):
        parser.error("--shard takes N >= 1 with --exchange ddp or bf16 (HSDP) or gradagg (gradagg's AdamW, its "
                     "default second moment, no warm-up)")
    if args.exchange == "local" and (args.shard or args.outer_bits not in (None, 1, 2, 4, 8, 32) or args.local_steps < 1
                                     or args.outer_lr <= 0 or not 0 <= args.outer_momentum < 1):
        parser.error("--exchange local takes no --shard, --outer-bits 1, 2, 4, 8 or 32, --local-steps >= 1, "
                     "--outer-lr > 0 and --outer-momentum in [0, 1)")
    return args


def load_text(folder, corpus=None):
    if corpus:
        with open(corpus, "rb") as f:
            data = f.read()
    else:
        folder = folder or sysconfig.get_paths()["stdlib"]
        files = sorted(glob.glob(os.path.join(folder, "*.py")))
        if not files:
            sys.exit(f"train_gpt: no *.py files in {folder} (--data)")
        data = b"".join(open(f, "rb").read() for f in files)
    tokens = torch.frombuffer(bytearray(data), dtype=torch.uint8)  # bytes; a batch is widened when drawn
    cut = int(0.9 * len(tokens))
    return tokens[:cut], tokens[cut:]


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # torch 1.x
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            y = scores.masked_fill(~mask, float("-inf")).softmax(-1) @ v
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


class GPT(nn.Module):
    def __init__(self, layers, dim, heads, context):
        super().__init__()
        self.embed, self.position = nn.Embedding(256, dim), nn.Embedding(context, dim)
        self.blocks = nn.Sequential(*[Block(dim, heads) for _ in range(layers)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 256, bias=False)
        self.head.weight = self.embed.weight  # tied
        self.apply(self._init)

    @staticmethod
    def _init(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        return self.head(self.norm(self.blocks(self.embed(tokens) + self.position(positions))))


def batch_of(text, generator, batch, context, device, first_window=None):
    """`batch` windows of context + 1 bytes: at random places (`generator`), or consecutive ones from first_window."""
    if first_window is None:
        starts = torch.randint(0, len(text) - context - 1, (batch,), generator=generator)
    else:
        starts = context * (first_window + torch.arange(batch))
    rows = torch.stack([text[s:s + context + 1] for s in starts.tolist()]).long()
    return rows[:, :-1].to(device), rows[:, 1:].to(device)


def learning_rate(args, step):
    if step < args.lr_warmup:
        return args.lr * (step + 1) / args.lr_warmup
    progress = (step - args.lr_warmup) / max(1, args.steps - args.lr_warmup)
    return args.lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress)))


def bytes_per_step(args, model, steps, size, state):
    """Bytes a rank sends to the other ranks per step, averaged over the steps run: what gradagg's hook counted; for
    DDP's allreduce and PyTorch's hooks, a ring allreduce's 2 (N - 1) / N of the elements they reduce (PowerSGD: P and
    Q of each matrix it compresses, by its own rule, and the rest whole, from --powersgd-start on)."""
    parameters = list(model.parameters())
    elements = sum(p.numel() for p in parameters)
    if args.shard:  # a rank sends its shard between the nodes
        elements, size = elements / args.shard, size // args.shard
    if args.exchange == "local":
        return state.bytes_per_step()
    if args.exchange == "gradagg":
        bits = state.bits_per_element()  # None: nothing crossed nodes (one node)
        return 0.0 if bits is None else bits / 8 * elements
    ring = 2 * (size - 1) / size
    if args.exchange == "ddp":
        return ring * 4 * elements
    if args.exchange == "bf16":
        return ring * 2 * elements
    compressed = 0
    for p in parameters:
        n, m = p.shape[0], p.numel() // p.shape[0]
        rank = min(n, m, args.powersgd_rank)
        small = (n + m) * rank
        compressed += small if p.dim() > 1 and small * 2 < n * m else p.numel()  # min_compression_rate 2
    whole = min(steps, args.powersgd_start)
    return ring * 4 * (whole * elements + (steps - whole) * compressed) / steps


def label_of(args, state):
    if args.label:
        return args.label
    if args.exchange == "local":
        streaming = f", {args.fragments} fragments, delay {args.delay}" if args.fragments > 1 or args.delay else ""
        streaming += ", outer momentum inside" if args.outer_momentum_inside else ""
        return (f"local steps H={args.local_steps}, {'float32' if state.bits == 32 else f'{state.bits}-bit'}"
                f" outer gradient{streaming}, torch AdamW inside")
    if args.shard:
        return (f"FSDP2 over {args.shard}, gradagg {state.bits} bit, gradagg AdamW" if args.exchange == "gradagg" else
                f"HSDP (FSDP2 over {args.shard}{', bf16 reduction' if args.exchange == 'bf16' else ''})")
    if args.exchange == "gradagg":
        if state.warmup == "auto":
            warmup = f" after an automatic early phase at {state.warmup_bits} bits"
            if args.optimizer != "gradagg":
                warmup += " (which only gradagg's AdamW ends)"
        else:
            warmup = f", {state.warmup_steps} steps at {state.warmup_bits} bits" if state.warmup_steps else ""
        if args.optimizer == "gradagg" and (args.second_moment == "synced" or state.warmup in (0, "auto")):
            warmup += ", synchronised second moment"
        return f"gradagg {state.bits} bit{warmup}, {args.optimizer} AdamW"
    if args.exchange == "powersgd":
        return f"PowerSGD rank {args.powersgd_rank} from step {args.powersgd_start}"
    return {"ddp": "DDP allreduce", "bf16": "DDP bf16 compression"}[args.exchange]


def main(argv=None):
    args = parse_args(argv)
    gradagg.torch.init_process_group_from_mpi(backend=args.backend)
    rank, size = dist.get_rank(), dist.get_world_size()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device("cpu")
    if torch.cuda.is_available():
        device = torch.device("cuda", rank % torch.cuda.device_count())
    if device.type == "cuda":
        torch.cuda.set_device(device)
    train_text, validation_text = load_text(args.data, args.corpus)
    reads = args.steps * size * args.batch * args.context + 1  # the training bytes --corpus reads, in order
    if args.corpus and reads > len(train_text):
        sys.exit(f"train_gpt: rank {rank}: {args.steps} steps of {size} x {args.batch} windows of {args.context} "
                 f"bytes read {reads} bytes, but {args.corpus} has {len(train_text)} bytes of training text: give a "
                 "larger corpus or fewer steps")
    torch.manual_seed(args.seed)
    model = GPT(args.layers, args.dim, args.heads, args.context).to(device)
    bucket = {} if args.bucket_size is None else {"bucket_size": args.bucket_size}
    bucket_cap_mb = 25  # DDP's default
    if args.exchange == "powersgd":
        # PowerSGD's hook starts a bucket's second allreduce from the first one's callback, so with several buckets
        # the ranks can issue their collectives in different orders; gloo then aborts ("Received data size doesn't
        # match expected size") at the first compressed step, as seen on CPUs and on the GPU machine. One bucket
        # (DDP's first-bucket limit included) leaves a single chain of collectives.
        bucket_cap_mb = 1 << 20
        dist._DEFAULT_FIRST_BUCKET_BYTES = bucket_cap_mb << 20
    if args.shard:
        if size % args.shard:
            sys.exit(f"train_gpt: rank {rank}: --shard {args.shard} does not divide the {size} ranks")
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        mesh = init_device_mesh(device.type, (size // args.shard, args.shard), mesh_dim_names=("node", "shard"))
        on = mesh["shard"] if args.exchange == "gradagg" else mesh  # gradagg: the node's 1-D mesh; DDP: HSDP
        policy = {"mp_policy": MixedPrecisionPolicy(reduce_dtype=torch.bfloat16)} if args.exchange == "bf16" else {}
        for block in model.blocks:
            fully_shard(block, mesh=on, **policy)
        fully_shard(model, mesh=on, **policy)
        ddp = model
    elif args.exchange == "local":
        def outer(parameters):
            if args.outer_momentum_inside:
                return gradagg.torch.NesterovInside(args.outer_lr, args.outer_momentum)(parameters)
            if args.outer_momentum:
                return torch.optim.SGD(parameters, lr=args.outer_lr, momentum=args.outer_momentum, nesterov=True)
            return torch.optim.SGD(parameters, lr=args.outer_lr)
        local = gradagg.torch.LocalSteps(model, args.local_steps, outer_optimizer=outer, fragments=args.fragments,
                                         delay=args.delay,
                                         **({} if args.outer_bits is None else {"bits": args.outer_bits}), **bucket)
        # A node of one rank has nothing to average: DDP over it would only copy every gradient through gloo.
        ddp = (model if local.ranks_per_node == 1 else
               torch.nn.parallel.DistributedDataParallel(model, process_group=local.node_group))
    elif size == 1 and args.exchange == "ddp":
        ddp = model  # one rank: DDP's arithmetic without a collective (the baseline at a batch of several ranks')
    else:
        ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=bucket_cap_mb)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    betas = (args.beta1, args.beta2)
    state = local if args.exchange == "local" else None
    clip_in_optimizer = False
    width = {} if args.bits is None else {"bits": args.bits}  # none: the hook's default
    if args.exchange == "gradagg" and args.shard:
        state = gradagg.torch.FSDPGradaggState(args.shard, momentum=args.beta1, **width, **bucket).attach(model)
        optimizer = gradagg.torch.AdamW(groups, state, lr=args.lr, betas=betas, max_grad_norm=args.clip or None,
                                        variance_interval=args.variance_interval, variance_bits=args.variance_bits,
                                        max_update=args.max_update, guard=args.guard)
        clip_in_optimizer = True
    elif args.exchange == "gradagg":
        paired = args.optimizer == "gradagg"
        state = gradagg.torch.GradaggState(momentum=args.beta1 if paired else 0.0, warmup_steps=args.warmup_steps,
                                           warmup_bits=args.warmup_bits, check_optimizers=not args.unchecked,
                                           **width, **bucket)
        ddp.register_comm_hook(state, gradagg.torch.comm_hook)
        if paired:
            optimizer = gradagg.torch.AdamW(groups, state, lr=args.lr, betas=betas,
                                            max_grad_norm=args.clip or None,
                                            second_moment=args.second_moment,
                                            variance_steps=args.variance_steps,
                                            variance_interval=args.variance_interval,
                                            variance_bits=args.variance_bits, max_update=args.max_update,
                                            guard=args.guard)
            clip_in_optimizer = True
        else:
            optimizer = torch.optim.AdamW(groups, lr=args.lr, betas=betas)
    else:
        if args.exchange == "bf16" and not args.shard:  # sharded: FSDP2's bf16 reduction (above)
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)
        elif args.exchange == "powersgd":
            from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook
            powersgd = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=args.powersgd_rank,
                                                   start_powerSGD_iter=args.powersgd_start)
            ddp.register_comm_hook(powersgd, powerSGD_hook.powerSGD_hook)
        optimizer = torch.optim.AdamW(groups, lr=args.lr, betas=betas)
    autocast = (torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda"
                else contextlib.nullcontext())
    generator = torch.Generator().manual_seed(args.seed * 1000 + rank)

    def evaluate(seconds):
        """The validation loss over every rank's batches, and rank 0's training clock: the same on every rank, so
        all stop at the same evaluation."""
        model.eval()
        total = torch.zeros(2, device=device)
        evaluation = torch.Generator().manual_seed(12345 + rank)
        with torch.no_grad(), autocast:
            for _ in range(args.eval_batches):
                inputs, targets = batch_of(validation_text, evaluation, args.batch, args.context, device)
                total[0] += F.cross_entropy(model(inputs).float().view(-1, 256), targets.reshape(-1))
        if rank == 0:
            total[1] = seconds
        dist.all_reduce(total)
        model.train()
        return total[0].item() / (args.eval_batches * size), total[1].item()

    rows, started, loss, stopped = [], time.time(), None, "steps"
    for step in range(args.steps):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(args, step)
        first_window = (step * size + rank) * args.batch if args.corpus else None
        inputs, targets = batch_of(train_text, generator, args.batch, args.context, device, first_window)
        with autocast:
            loss = F.cross_entropy(ddp(inputs).float().view(-1, 256), targets.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if args.clip and not clip_in_optimizer:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        optimizer.step()
        if args.exchange == "local":
            local.step()
            if step + 1 == args.steps:
                local.synchronize()  # the last evaluation is of the model the nodes share
        if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
            if device.type == "cuda":
                torch.cuda.synchronize()
            validation, seconds = evaluate(time.time() - started)
            bits = state.bits_per_element() if state is not None else None
            rows.append({"step": step + 1, "seconds": round(seconds, 2), "validation_loss": round(validation, 4),
                         "bits_per_element": round(bits, 3) if bits is not None else ""})
            if rank == 0:
                print(f"train_gpt: step {step + 1} train {loss.item():.4f} validation {validation:.4f} "
                      f"({seconds:.1f} s{f', {bits:.2f} bits per element' if bits is not None else ''})",
                      flush=True)
            if args.target_loss is not None and validation <= args.target_loss:
                stopped = "target"
                break
            if args.time_limit is not None and seconds >= args.time_limit:
                stopped = "time limit"
                break
    steps_run = rows[-1]["step"]  # the last step evaluates, so the last row is where the run stopped
    if rank == 0:
        label = label_of(args, state)
        parameters = sum(p.numel() for p in model.parameters())
        if args.csv:
            new = not os.path.exists(args.csv)
            with open(args.csv, "a") as f:
                if new:
                    f.write("label,seed,step,seconds,validation_loss,bits_per_element\n")
                for row in rows:
                    f.write(f"{label},{args.seed},{row['step']},{row['seconds']},{row['validation_loss']},"
                            f"{row['bits_per_element']}\n")
        summary = {"label": label, "seed": args.seed, "ranks": size, "parameters": parameters,
                   "final_validation_loss": rows[-1]["validation_loss"], "seconds": rows[-1]["seconds"],
                   "bits_per_element": rows[-1]["bits_per_element"], "steps": steps_run, "stopped": stopped,
                   "bytes_per_step": round(bytes_per_step(args, model, steps_run, size, state)),
                   "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                   "torch": torch.__version__, "args": vars(args), "rows": rows,
                   "guard_events": getattr(optimizer, "events", []),
                   "early_phase_steps": getattr(state, "early_steps", None)}  # None: none, or not ended
        if args.json:
            with open(args.json, "w") as f:
                json.dump(summary, f, indent=1)
        print(f"train_gpt: {label}, seed {args.seed}, {parameters} parameters: validation {rows[-1]['validation_loss']}"
              f" after {steps_run} steps ({stopped})")
    if isinstance(state, gradagg.torch.FSDPGradaggState):
        state.close()
    elif state is not None and args.exchange != "local":  # LocalSteps' Aggregators close at exit
        for aggregator in state.aggregators.values():
            aggregator.close()


def end_without_teardown():
    """Finalises MPI and ends the process without tearing torch down. torch 1.13's ProcessGroupGloo destructor joins
    its worker threads while holding the GIL, and a worker still freeing a tensor that Python has let go of waits
    for the GIL: at exit one rank then hung until killed (a DDP run, and CI's gpt_adamw_one_bit; the stack is in
    bench/results/time_to_target/cpu_1gbit/exit_hang_stack.txt). The process group stays registered until here, so
    DDP's Reducer is never its last owner, and nothing destroys it."""
    sys.stdout.flush()
    sys.stderr.flush()
    gradagg.finalize()
    os._exit(0)


if __name__ == "__main__":
    main()
    end_without_teardown()
