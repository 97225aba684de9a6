"""Forward mode against reverse mode: when each wins, a Newton step with Hessian-vector
products, and the graph of a forward-mode computation.

    python -m minigrad.demos.forward_vs_reverse [--out runs/forward_vs_reverse] [--max-size 64]

1. The Jacobian of f: R^n -> R^m, f(x) = tanh(W2 tanh(W1 x)), by ``func.jacfwd`` (vmap of
   forward mode over the n basis vectors of the input: one forward pass carrying n
   tangents) and by ``func.jacrev`` (one forward pass, then vmap of the backward pass over
   the m basis vectors of the output: one backward pass of a batch of m), timed as n grows
   with m fixed and as m grows with n fixed. ``jacobians.png`` shows where each wins: the work
   grows with n for forward mode and with m for reverse mode, but at small sizes both are
   mostly the per-op overhead of one batched pass, which vmap pays once.
2. A Newton step on a small logistic regression: the Newton direction solves H d = -g by
   conjugate gradients, each iteration one Hessian-vector product (``func.hvp``, forward
   over reverse) instead of the whole Hessian.
3. ``tangent_graph``: the graph a tangent is computed by. The input requires grad, so the
   jvp rules' own ops are recorded: d tanh(w x) = (1 - out^2) * (w dx), drawn by mg.viz.
"""
import os
import sys
import time

import numpy as np

import minigrad as mg
from minigrad import func
from minigrad.autograd import forward_ad

from ._cli import (make_out_dir, make_parser, naming, parse_checked, positive_int, require,
                   writing_to)
from ._pictures import report, save

NAME = "forward_vs_reverse"


def build_parser():
    p = make_parser(NAME, "Jacobians by forward and reverse mode, a Newton step with "
                          "Hessian-vector products, and a forward-mode graph.")
    p.add_argument("--out", default=os.path.join("runs", NAME), help="output folder")
    p.add_argument("--max-size", type=positive_int, default=64,
                   help="the largest n (inputs) and m (outputs) timed")
    p.add_argument("--fixed", type=positive_int, default=16,
                   help="m while n varies, and n while m varies")
    p.add_argument("--repeats", type=positive_int, default=5, help="timings per point (best)")
    return p


def parse_args(argv=None):
    """The command line, checked (the output folder too) before any work."""
    return parse_checked(build_parser(), argv)


# --- 1. Jacobians ---------------------------------------------------------------------------

def mlp(n, m, hidden=32, seed=0):
    """f: R^n -> R^m, x -> tanh(W2 tanh(W1 x)), in float64."""
    rng = np.random.default_rng(seed)
    w1 = mg.tensor(rng.standard_normal((hidden, n)) / np.sqrt(n))
    w2 = mg.tensor(rng.standard_normal((m, hidden)) / np.sqrt(hidden))
    return lambda x: (w2 @ (w1 @ x).tanh()).tanh()


def best_time(fn, repeats):
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def time_jacobians(n, m, repeats):
    """(seconds by jacfwd, seconds by jacrev) for one f: R^n -> R^m; the two Jacobians are
    checked equal first."""
    f = mlp(n, m)
    x = mg.tensor(np.random.default_rng(1).standard_normal(n))
    fwd, rev = func.jacfwd(f)(x), func.jacrev(f)(x)
    if not np.allclose(fwd.numpy(), rev.numpy(), rtol=1e-10, atol=1e-12):
        raise AssertionError("jacfwd and jacrev disagree")
    return (best_time(lambda: func.jacfwd(f)(x), repeats),
            best_time(lambda: func.jacrev(f)(x), repeats))


def sizes(largest):
    out, k = [], 1
    while k <= largest:
        out.append(k)
        k *= 2
    return out


def sweep(largest, fixed, repeats):
    """{"n": [(n, fwd, rev), ...] with m = fixed, "m": [(m, fwd, rev), ...] with n = fixed}."""
    return {"n": [(n,) + time_jacobians(n, fixed, repeats) for n in sizes(largest)],
            "m": [(m,) + time_jacobians(fixed, m, repeats) for m in sizes(largest)]}


def crossover(rows):
    """The first size at which the two modes change places (forward faster before it), or
    None."""
    for size, fwd, rev in rows:
        if fwd > rev:
            return size
    return None


def plot(results, fixed, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, (key, other) in zip(axes, (("n", "m"), ("m", "n"))):
        rows = results[key]
        xs = [r[0] for r in rows]
        ax.plot(xs, [r[1] * 1e3 for r in rows], "o-", label="jacfwd (vmap over n tangents)")
        ax.plot(xs, [r[2] * 1e3 for r in rows], "s-",
                label="jacrev (vmap over m cotangents)")
        ax.axvline(fixed, color="grey", ls=":", lw=1)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(f"{key} ({'inputs' if key == 'n' else 'outputs'}); {other} = {fixed}")
        ax.set_ylabel("time for the whole Jacobian (ms)")
        ax.legend(fontsize=8)
        ax.set_title(f"Jacobian of R^n -> R^m, {other} = {fixed}")
    fig.tight_layout()
    with naming(path):
        fig.savefig(path, dpi=110)
    plt.close(fig)


# --- 2. A Newton step with Hessian-vector products ---------------------------------------------

def logistic_problem(seed=0, n=200, d=5):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = (X @ rng.standard_normal(d) + 0.5 * rng.standard_normal(n) > 0).astype(np.float64)
    X, y = mg.tensor(X), mg.tensor(y)

    def loss(w):
        z = X @ w
        return ((z.exp() + 1.0).log() - y * z).mean() + 1e-3 * (w * w).sum()
    return loss, d


def newton_step(loss, w, iterations=10):
    """w + d, d solving H d = -g by conjugate gradients, one hvp per iteration."""
    g = func.grad(loss)(w)
    d, r = mg.zeros_like(w), -g
    p, rr = r, float((r * r).sum())
    for _ in range(iterations):
        hp = func.hvp(loss, (w,), (p,))[1][0]
        alpha = rr / float((p * hp).sum())
        d, r = d + alpha * p, r - alpha * hp
        new = float((r * r).sum())
        if new < 1e-24:
            break
        p, rr = r + (new / rr) * p, new
    return w + d


# --- 3. The graph of a forward-mode computation -------------------------------------------------

def tangent_graph():
    """The tangent of tanh(w x) along dx, computed with x requiring grad: the jvp rules'
    ops are recorded, so the tangent has a graph of its own."""
    x = mg.tensor([0.5, -1.0], dtype=mg.float64, requires_grad=True)
    w = mg.tensor([2.0, 3.0], dtype=mg.float64)
    with forward_ad.dual_level():
        y = (w * forward_ad.make_dual(x, mg.ones_like(x))).tanh()
        tangent = forward_ad.unpack_dual(y).tangent
    return mg.viz.draw({"x": x, "w": w, "tangent of tanh(w x)": tangent}, show_values=True)


def main(argv=None):
    args = parse_args(argv)
    require(NAME, "matplotlib", "graphviz")
    make_out_dir(NAME, args.out)
    with writing_to(NAME, args.out):
        results = sweep(args.max_size, args.fixed, args.repeats)
        for key, other in (("n", "m"), ("m", "n")):
            print(f"{key:>4}  ({other} = {args.fixed})   jacfwd ms   jacrev ms   faster")
            for size, fwd, rev in results[key]:
                print(f"{size:>4}                {fwd * 1e3:9.2f}   {rev * 1e3:9.2f}   "
                      f"{'forward' if fwd < rev else 'reverse'}")
        cross = crossover(results["n"])
        print(f"with m = {args.fixed} outputs, reverse mode is faster from n = {cross} inputs on"
              if cross else f"forward mode was faster at every n up to {args.max_size}")
        paths = [os.path.join(args.out, "jacobians.png")]
        plot(results, args.fixed, paths[0])

        loss, d = logistic_problem()
        w0 = mg.zeros(d, dtype=mg.float64)
        w1 = newton_step(loss, w0)
        gd = w0 - 1.0 * func.grad(loss)(w0)
        print(f"logistic regression: loss {loss(w0).item():.6f} at w = 0; one gradient step "
              f"(lr 1) {loss(gd).item():.6f}; one Newton step (CG on hvp) {loss(w1).item():.6f}; "
              f"two {loss(newton_step(loss, w1)).item():.6f}")
        paths += save(tangent_graph(), args.out, "tangent_graph")
        report(args.out, paths, PICTURES)
        return results


# What the demo writes, and what to look at in each
PICTURES = {
    "jacobians": "the time of the Jacobian by jacfwd (a batch of n tangents) and by jacrev (a "
                 "batch of m cotangents) as n and m grow: where the curves cross, the other "
                 "mode wins",
    "tangent_graph": "the graph of one forward-mode derivative: each value beside its tangent",
}


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
