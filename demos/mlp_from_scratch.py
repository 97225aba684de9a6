"""An MLP from raw tensors: train it, then check its gradients four ways.

    python -m minigrad.demos.mlp_from_scratch [--steps 1000] [--lr 0.05] [--device cpu] [--seed 0]
                                              [--compile]

1. Two interleaved spirals, classified by a 2-64-64-2 MLP written with nothing but
   minigrad tensors and SGD with momentum (no nn library): loss and accuracy as it learns.
2. Higher-order gradients: z = (dy/dx)^3 + y with y = x^2 at x = 2 has dz/dx = 100.
3. gradcheck: the network's analytic gradient against finite differences, in float64.
4. detect_anomaly: the op that first produces a NaN is named, with the line that made it.

It prints everything and writes no files. The questions people ask about autograd itself
(accumulation, order, broadcasts, memory, NaNs) are answered in docs/autograd_tour.md and
notebooks/01_autograd_tour.ipynb.
"""
import math

import numpy as np

import minigrad as mg

from ._cli import (TrainingStep, add_compile_option, add_device_option, make_parser, nonneg_int,
                   positive_float, positive_int, summary)


def spirals(n, rng):
    """Two spirals of n points each, with labels 0 and 1."""
    t = np.sqrt(rng.uniform(0.05, 1, n)) * 3 * math.pi
    arm = np.stack([t * np.cos(t), t * np.sin(t)], axis=1) / (3 * math.pi)
    x = np.concatenate([arm, -arm]) + rng.normal(0, 0.02, (2 * n, 2))
    y = np.concatenate([np.zeros(n, np.int64), np.ones(n, np.int64)])
    return x.astype(np.float32), y


def init_params(sizes, device, dtype=mg.float32):
    """Weights uniform in +-1/sqrt(fan_in), as PyTorch's Linear."""
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        bound = 1 / math.sqrt(fan_in)
        params.append((mg.rand(fan_out, fan_in, dtype=dtype, device=device) * 2 - 1) * bound)
        params.append((mg.rand(fan_out, dtype=dtype, device=device) * 2 - 1) * bound)
    return [p.requires_grad_() for p in params]


def forward(params, x):
    h = x
    for i in range(0, len(params), 2):
        h = h @ params[i].T + params[i + 1]
        if i + 2 < len(params):
            h = h.tanh()
    return h


def cross_entropy(logits, y):
    return -logits.log_softmax(-1)[mg.arange(len(y), device=logits.device), y].mean()


def train(args):
    rng = np.random.default_rng(args.seed)
    x_np, y_np = spirals(200, rng)
    x, y = mg.tensor(x_np, device=args.device), mg.tensor(y_np, device=args.device)
    params = init_params([2, 64, 64, 2], args.device)
    velocity = [mg.zeros_like(p) for p in params]
    print(f"1. training a 2-64-64-2 MLP on {len(y)} spiral points ({args.device}), "
          f"SGD with momentum 0.9")

    def update(x, y):
        loss = cross_entropy(forward(params, x), y)
        loss.backward()
        with mg.no_grad():  # v = 0.9 v + g;  p = p - lr v
            for p, v in zip(params, velocity):
                v.mul_(0.9).add_(p.grad)
                p.sub_(v, alpha=args.lr)
                p.grad = None
        return loss

    update = TrainingStep(update, args.compile)  # --compile: captured, then replayed
    for step in range(1, args.steps + 1):
        loss = update(x, y)
        if step % max(1, args.steps // 5) == 0 or step == 1:
            with mg.no_grad():
                acc = (forward(params, x).argmax(-1) == y).float().mean().item()
            print(f"   step {step:4d}  loss {loss.item():.4f}  accuracy {acc:.1%}")
    update.report()
    return params


def higher_order():
    x = mg.tensor(2.0, requires_grad=True)
    y = x ** 2
    (dy_dx,) = mg.grad(y, x, create_graph=True)   # 2x, itself differentiable
    z = dy_dx ** 3 + y
    (dz_dx,) = mg.grad(z, x)                      # 24 x^2 + 2x
    print(f"2. y = x^2, z = (dy/dx)^3 + y at x = 2: dz/dx = {dz_dx.item():g} (exact: 100)")


def check_gradients(seed):
    mg.manual_seed(seed)
    params = [p.detach().requires_grad_() for p in init_params([2, 5, 2], "cpu", mg.float64)]
    x = mg.randn(4, 2, dtype=mg.float64)
    y = mg.tensor([0, 1, 1, 0])
    ok = mg.autograd.gradcheck(lambda *ps: cross_entropy(forward(ps, x), y), params)
    print(f"3. gradcheck of the network's loss in float64: {'passed' if ok else 'FAILED'}")


def catch_anomaly():
    x = mg.tensor([1.0, -1.0], requires_grad=True)
    try:
        with mg.detect_anomaly():
            (x.log() * 2).sum().backward()
    except RuntimeError as e:
        print(f"4. detect_anomaly: {e}")


def build_parser():
    parser = make_parser("mlp_from_scratch", summary(__doc__))
    parser.add_argument("--steps", type=positive_int, default=1000,
                        help="training steps of the MLP")
    parser.add_argument("--lr", type=positive_float, default=0.05,
                        help="learning rate of SGD with momentum")
    add_device_option(parser)
    parser.add_argument("--seed", type=nonneg_int, default=0,
                        help="seeds the data and the weights")
    add_compile_option(parser)
    return parser


def parse_args(argv=None):
    return build_parser().parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    mg.manual_seed(args.seed)
    train(args)
    higher_order()
    check_gradients(args.seed)
    catch_anomaly()


if __name__ == "__main__":
    main()
