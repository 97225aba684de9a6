"""vmap against a Python loop, and against torch.func, interleaved in one process.

    python -m benchmarks.vmap [--repeats 30] [--threads N]

Workloads
* ``per-example gradients``: the gradient of a small MLP's (32-64-10, float32) loss for
  each of a batch of 64 examples: ``vmap(grad(loss), in_dims=(None, 0, 0))`` against 64
  calls of ``grad(loss)``, each beside torch.func doing the same.
* ``jacrev``: the (64, 16) Jacobian of a 16 -> 64 function (tanh of a linear map, then a
  second one) by ``func.jacrev`` (vmap over the 64 basis vectors of the output) against 64
  backward passes, one per row, beside torch.func.jacrev.

Medians of calls run in alternating blocks (see timing.interleaved_all). Speed is reported
here, never asserted.
"""
import argparse

import numpy as np

import minigrad as mg
from minigrad import func
from benchmarks.timing import blas_threads, interleaved_all, machine_line, set_threads, torch


def mlp(lib, rng, sizes=(32, 64, 10), batch=64):
    """Parameters (a dict), inputs and targets, identical for both libraries."""
    make = (lambda a: torch.tensor(a)) if lib is torch else (lambda a: mg.tensor(a))
    params = {}
    for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
        bound = 1 / np.sqrt(n_in)
        params[f"w{i}"] = make(rng.uniform(-bound, bound, (n_out, n_in)).astype(np.float32))
        params[f"b{i}"] = make(rng.uniform(-bound, bound, n_out).astype(np.float32))
    x = make(rng.standard_normal((batch, sizes[0])).astype(np.float32))
    y = make(rng.integers(0, sizes[-1], batch))
    return params, x, y


def loss_of(lib):
    F = torch.nn.functional if lib is torch else mg.nn.functional

    def loss(p, x, y):  # one example: x (32,), y ()
        h = F.linear(x, p["w0"], p["b0"]).relu()
        logits = F.linear(h, p["w1"], p["b1"])
        return F.cross_entropy(logits[None], y[None])
    return loss


def per_example(lib, fn_lib, params, x, y):
    grad = fn_lib.grad(loss_of(lib))
    vmapped = fn_lib.vmap(grad, in_dims=(None, 0, 0))

    def by_vmap():
        return vmapped(params, x, y)

    def by_loop():
        return [grad(params, x[i], y[i]) for i in range(x.shape[0])]
    return by_vmap, by_loop


def jacobians(lib, fn_lib, rng):
    make = (lambda a: torch.tensor(a)) if lib is torch else (lambda a: mg.tensor(a))
    w1 = make(rng.standard_normal((32, 16)).astype(np.float32))
    w2 = make(rng.standard_normal((64, 32)).astype(np.float32))
    x = make(rng.standard_normal(16).astype(np.float32))

    def f(v):
        return w2 @ (w1 @ v).tanh()

    def by_vmap():
        return fn_lib.jacrev(f)(x)

    def by_loop():
        out, vjp_fn = fn_lib.vjp(f, x)
        rows = []
        for k in range(out.shape[0]):
            u = out.new_zeros(out.shape)
            u[k] = 1
            rows.append(vjp_fn(u)[0])
        return rows
    return by_vmap, by_loop


def report(name, times):
    labels = ("minigrad vmap", "minigrad loop", "torch vmap", "torch loop")
    parts = [f"{label} {t * 1e3:8.2f} ms" for label, t in zip(labels, times) if t is not None]
    line = f"{name:<30} " + "   ".join(parts)
    line += f"   | minigrad loop / vmap {times[1] / times[0]:5.1f}x"
    if times[2] is not None:
        line += f"   | minigrad vmap / torch vmap {times[0] / times[2]:5.2f}x"
    print(line, flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--threads", type=int, default=None,
                        help="threads for both libraries (default: PyTorch's default)")
    args = parser.parse_args(argv)
    threads = set_threads(args.threads)
    print(machine_line())
    print(f"threads: torch intra-op {threads if torch else '-'}; numpy BLAS {blas_threads()}")

    ours = per_example(mg, func, *mlp(mg, np.random.default_rng(0)))
    theirs = per_example(torch, torch.func, *mlp(torch, np.random.default_rng(0))) \
        if torch else (None, None)
    report("per-example grads, batch 64", interleaved_all(list(ours) + list(theirs),
                                                          args.repeats))
    ours = jacobians(mg, func, np.random.default_rng(1))
    theirs = jacobians(torch, torch.func, np.random.default_rng(1)) if torch else (None, None)
    report("jacrev 16 -> 64", interleaved_all(list(ours) + list(theirs), args.repeats))


if __name__ == "__main__":
    main()
