"""Engine benchmarks: minigrad against PyTorch, interleaved in one process.

    python -m benchmarks.bench_engine [--repeats 30] [--threads N]

Workloads
* ``chain``: 100 small elementwise ops on (8, 8) tensors, forward and backward. Per-op
  overhead: the time is divided by the number of ops.
* ``mlp``: one training step of a 784-512-10 MLP at batch 256: forward, cross-entropy,
  backward, plain SGD update.
* ``gelu``: GELU (the exact one, by erf) of a (8192, 512) float32 tensor, forward and
  backward: a GPT block's activation at 16 sequences of 256 tokens.

minigrad and PyTorch run in alternating blocks of 20 repeats, so both see the same machine
state (alternating every run would let each library's spinning worker threads slow the
other down); the medians and the ratio minigrad / PyTorch are printed. PyTorch's intra-op
threads and NumPy's BLAS threads are reported (both default to the number of cores).
Nothing here is a test: speed is reported, never asserted.
"""
import argparse

import numpy as np

import minigrad as mg
from benchmarks.timing import blas_threads, interleaved, machine_line, set_threads, torch

CHAIN_OPS = 100


def chain_minigrad(x, w):
    y = x
    for i in range(CHAIN_OPS // 5):  # five ops a round
        y = ((y * w + x).tanh() - w) * 0.5
    y.sum().backward()


def chain_torch(x, w):
    y = x
    for i in range(CHAIN_OPS // 5):  # five ops a round
        y = ((y * w + x).tanh() - w) * 0.5
    y.sum().backward()


def make_mlp(lib, rng, batch=256, sizes=(784, 512, 10)):
    """Identical weights and data for both libraries (PyTorch's default init ranges)."""
    def param(*shape):
        bound = 1 / np.sqrt(shape[-1])
        arr = rng.uniform(-bound, bound, size=shape).astype(np.float32)
        if lib == "torch":
            return torch.tensor(arr, requires_grad=True)
        return mg.tensor(arr, requires_grad=True)
    params = [param(sizes[1], sizes[0]), param(sizes[1]), param(sizes[2], sizes[1]),
              param(sizes[2])]
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[2], batch)
    if lib == "torch":
        return params, torch.tensor(x), torch.tensor(y)
    return params, mg.tensor(x), mg.tensor(y)


def mlp_step_minigrad(params, x, y, lr=0.01):
    w1, b1, w2, b2 = params
    h = (x @ w1.T + b1).relu()
    logits = h @ w2.T + b2
    loss = -logits.log_softmax(-1)[mg.arange(len(y)), y].mean()
    loss.backward()
    with mg.no_grad():
        for p in params:
            p.sub_(p.grad, alpha=lr)
            p.grad = None


def mlp_step_torch(params, x, y, lr=0.01):
    w1, b1, w2, b2 = params
    h = (x @ w1.T + b1).relu()
    logits = h @ w2.T + b2
    loss = torch.nn.functional.cross_entropy(logits, y)
    loss.backward()
    with torch.no_grad():
        for p in params:
            p.sub_(p.grad, alpha=lr)
            p.grad = None


def chain_inputs(seed=0, device="cpu"):
    """(x, w) as minigrad leaves and (tx, tw) as torch leaves (None without torch), on
    ``device``."""
    xa, wa = np.random.default_rng(seed).standard_normal((2, 8, 8)).astype(np.float32)
    x, w = (mg.tensor(a, requires_grad=True, device=device) for a in (xa, wa))
    if torch is None:
        return x, w, None, None
    return (x, w) + tuple(torch.tensor(a, requires_grad=True, device=device) for a in (xa, wa))


def gelu_inputs(seed=0, shape=(8192, 512)):
    """(x, grad) as minigrad tensors, (tx, tgrad) as torch tensors (None without torch)."""
    xa, ga = np.random.default_rng(seed).standard_normal((2,) + shape).astype(np.float32)
    out = [mg.tensor(xa, requires_grad=True), mg.tensor(ga)]
    if torch is None:
        return out + [None, None]
    return out + [torch.tensor(xa, requires_grad=True), torch.tensor(ga)]


def gelu_step(lib, x, grad):
    """GELU forward and backward (lib: minigrad's or torch's nn.functional)."""
    lib.gelu(x).backward(grad)
    x.grad = None


def compare(name, mg_call, torch_call, repeats, per=1, unit="ms", block=20):
    """Print the median time of each call (see timing.interleaved) and their ratio."""
    scale = {"ms": 1e3, "us": 1e6}[unit]
    m, t = interleaved(mg_call, torch_call, repeats, block=block, warmup=3)
    line = f"{name:<34} minigrad {m / per * scale:9.2f} {unit}"
    if t is not None:
        line += f"   torch {t / per * scale:9.2f} {unit}   ratio {m / t:5.2f}x"
    print(line, flush=True)
    return m / per * scale


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--threads", type=int, default=None,
                        help="threads for both libraries (default: PyTorch's default)")
    args = parser.parse_args(argv)
    threads = set_threads(args.threads)
    print(machine_line())
    print(f"threads: torch intra-op {threads if torch else '-'}; numpy BLAS {blas_threads()}")

    x, w, tx, tw = chain_inputs()
    compare(f"chain: per op, fwd+bwd ({CHAIN_OPS} ops)", lambda: chain_minigrad(x, w),
            (lambda: chain_torch(tx, tw)) if torch else None, args.repeats,
            per=CHAIN_OPS, unit="us")

    mg_mlp = make_mlp("mg", np.random.default_rng(1))
    torch_mlp = make_mlp("torch", np.random.default_rng(1)) if torch else None
    compare("mlp 784-512-10, batch 256: step", lambda: mlp_step_minigrad(*mg_mlp),
            (lambda: mlp_step_torch(*torch_mlp)) if torch else None, args.repeats)

    x, g, tx, tg = gelu_inputs()
    compare("gelu (8192, 512): fwd+bwd", lambda: gelu_step(mg.nn.functional, x, g),
            (lambda: gelu_step(torch.nn.functional, tx, tg)) if torch else None,
            max(3, args.repeats // 5), block=5)


if __name__ == "__main__":
    main()
