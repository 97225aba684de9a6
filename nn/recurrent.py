"""Recurrent layers with PyTorch's names, parameters and equations: RNN (tanh or relu), GRU and
LSTM over whole sequences (several layers, bidirectional, batch first or not, unbatched
input), and their one-step cells RNNCell, GRUCell and LSTMCell.

The parameters are PyTorch's, named as PyTorch names them (``weight_ih_l0``,
``weight_hh_l0``, ``bias_ih_l0``, ``bias_hh_l0``, with ``_reverse`` for the backward
direction; a cell's ``weight_ih``, ...), the gates stacked in PyTorch's order (GRU: reset,
update, new; LSTM: input, forget, cell, output), so a PyTorch state dict loads as it is. Each
step is a few Tensor ops, so autograd, forward mode and the devices work as for any other
layer; the input projections of all steps are one product per layer and direction.
"""
import math
import warnings

import minigrad as mg

from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "GRU": 3, "LSTM": 4}


def _rnn_tanh_step(gi, h, c, w_hh, b_hh):
    return (gi + F.linear(h, w_hh, b_hh)).tanh(), None


def _rnn_relu_step(gi, h, c, w_hh, b_hh):
    return (gi + F.linear(h, w_hh, b_hh)).relu(), None


def _gru_step(gi, h, c, w_hh, b_hh):
    """PyTorch's GRU cell: r, z from the summed gates, n = tanh(i_n + r * h_n), and
    h' = (h - n) * z + n (= (1 - z) * n + z * h)."""
    i_r, i_z, i_n = gi.chunk(3, -1)
    h_r, h_z, h_n = F.linear(h, w_hh, b_hh).chunk(3, -1)
    reset = (i_r + h_r).sigmoid()
    update = (i_z + h_z).sigmoid()
    new = (i_n + h_n * reset).tanh()
    return (h - new) * update + new, None


def _lstm_step(gi, h, c, w_hh, b_hh, w_hr=None):
    """PyTorch's LSTM cell: c' = f * c + i * g, h' = o * tanh(c'), then h' = h' W_hr^T when
    the layer projects its state (``proj_size``)."""
    i, f, g, o = (gi + F.linear(h, w_hh, b_hh)).chunk(4, -1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    h = o.sigmoid() * c.tanh()
    return (h if w_hr is None else F.linear(h, w_hr)), c


_STEPS = {"RNN_TANH": _rnn_tanh_step, "RNN_RELU": _rnn_relu_step, "GRU": _gru_step,
          "LSTM": _lstm_step}


def _check_sizes(name, input_size, hidden_size):
    for what, size in (("input_size", input_size), ("hidden_size", hidden_size)):
        if not isinstance(size, int) or isinstance(size, bool):
            raise TypeError(f"{name}: {what} should be of type int, got: "
                            f"{type(size).__name__}")
    if hidden_size <= 0:
        raise ValueError("hidden_size must be greater than zero")


class RNNBase(Module):
    """What RNN, GRU and LSTM share (``mode`` is "RNN_TANH", "RNN_RELU", "GRU" or "LSTM")."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0,
                 device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        _check_sizes(name, input_size, hidden_size)
        if not isinstance(num_layers, int) or num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or \
                not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if dropout > 0 and num_layers == 1:
            warnings.warn(f"dropout option adds dropout after all but last recurrent layer, "
                          f"so non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}")
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional = float(dropout), bidirectional
        self.proj_size = proj_size
        gates = _GATES[mode] * hidden_size
        state = proj_size or hidden_size  # (the size of h: projected, or the hidden size)
        directions = 2 if bidirectional else 1
        kw = dict(device=device, dtype=dtype)
        self._flat_weights_names = []
        for layer in range(num_layers):
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                width = input_size if layer == 0 else state * directions
                shapes = {"weight_ih": (gates, width), "weight_hh": (gates, state)}
                if bias:
                    shapes.update(bias_ih=(gates,), bias_hh=(gates,))
                if proj_size:
                    shapes.update(weight_hr=(proj_size, hidden_size))
                for kind, shape in shapes.items():
                    setattr(self, kind + suffix, Parameter(mg.empty(*shape, **kw)))
                    self._flat_weights_names.append(kind + suffix)
        self.reset_parameters()

    def reset_parameters(self):
        """Every weight and bias U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), as PyTorch."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            init.uniform_(weight, -bound, bound)

    def flatten_parameters(self):
        """Nothing to do (PyTorch packs the weights for cuDNN here)."""

    @property
    def all_weights(self):
        """The parameters of each layer and direction: [[weight_ih, weight_hh, bias_ih,
        bias_hh(, weight_hr)], ...]."""
        per = self._per_direction()
        names = self._flat_weights_names
        return [[getattr(self, n) for n in names[i:i + per]] for i in range(0, len(names), per)]

    def _per_direction(self):
        """How many parameters each layer and direction has."""
        return (4 if self.bias else 2) + (1 if self.proj_size else 0)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"  # (PyTorch's RNN shows no nonlinearity)
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s

    def forward(self, input, hx=None):
        lstm, name = self.mode == "LSTM", type(self).__name__
        if input.dim() not in (2, 3):
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D "
                             f"instead")
        batched = input.dim() == 3
        x = input.unsqueeze(1) if not batched else \
            input.transpose(0, 1) if self.batch_first else input
        if x.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {x.shape[-1]}")
        steps, batch = x.shape[0], x.shape[1]
        directions = 2 if self.bidirectional else 1
        layers = self.num_layers * directions
        sizes = [(layers, batch, self.proj_size or self.hidden_size),  # h
                 (layers, batch, self.hidden_size)]                     # c (LSTM's)
        states = [None, None] if hx is None else list(hx) if lstm else [hx, None]
        if lstm and hx is not None and len(states) != 2:
            raise RuntimeError(f"{name}: hx should be a tuple (h_0, c_0)")
        for i, h in enumerate(states[:2 if lstm else 1]):
            expected = sizes[i]
            if h is None:
                states[i] = mg.zeros(*expected, dtype=x.dtype, device=x.device)
                continue
            if h.dim() != (3 if batched else 2):
                raise RuntimeError(f"For {'batched 3-D' if batched else 'unbatched 2-D'} "
                                   f"input, hx should also be {3 if batched else 2}-D but got "
                                   f"{h.dim()}-D tensor")
            h = h if batched else h.unsqueeze(1)
            if tuple(h.shape) != expected:
                which = f"hidden[{i}]" if lstm else "hidden"
                raise RuntimeError(f"Expected {which} size {expected}, got "
                                   f"{list(h.shape if batched else h.squeeze(1).shape)}")
            states[i] = h
        h0, c0 = states
        step = _STEPS[self.mode]
        per = self._per_direction()
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(directions):
                k = layer * directions + direction
                weights = {n.split("_l")[0]: getattr(self, n)
                           for n in self._flat_weights_names[k * per:(k + 1) * per]}
                w_hh, b_hh = weights["weight_hh"], weights.get("bias_hh")
                projection = (weights["weight_hr"],) if self.proj_size else ()
                # (the input's part of every step at once)
                gi = F.linear(x, weights["weight_ih"], weights.get("bias_ih"))
                h, c = h0[k], (c0[k] if lstm else None)
                seq = [None] * steps
                for t in (range(steps - 1, -1, -1) if direction else range(steps)):
                    h, c = step(gi[t], h, c, w_hh, b_hh, *projection)
                    seq[t] = h
                outputs.append(mg.stack(seq, 0) if steps else
                               x.new_zeros(0, batch, sizes[0][-1]))
                h_n.append(h)
                c_n.append(c)
            x = outputs[0] if directions == 1 else mg.cat(outputs, 2)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, training=True)
        h_n = mg.stack(h_n, 0)
        c_n = mg.stack(c_n, 0) if lstm else None
        if not batched:
            x, h_n = x.squeeze(1), h_n.squeeze(1)
            c_n = c_n.squeeze(1) if lstm else None
        elif self.batch_first:
            x = x.transpose(0, 1)
        return (x, (h_n, c_n)) if lstm else (x, h_n)


class RNN(RNNBase):
    """An Elman RNN: h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (``nonlinearity``
    "relu": relu), over whole sequences, as PyTorch's nn.RNN.

    Shape:
        input (L, N, input_size) ((N, L, input_size) with batch_first, or unbatched
        (L, input_size)), optional h_0 (num_layers * D, N, hidden_size) where D is 2 when
        bidirectional -> output (L, N, D * hidden_size), h_n like h_0.
    """

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None,
                 dtype=None, proj_size=0):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             f"'relu'.")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity


class GRU(RNNBase):
    """A gated recurrent unit over whole sequences, as PyTorch's nn.GRU: r and z are sigmoids
    of the summed input and hidden gates, n = tanh(i_n + r * (h W_hn^T + b_hn)) and
    h' = (1 - z) * n + z * h. Shapes as RNN's."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None, proj_size=0):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device=device, dtype=dtype)


class LSTM(RNNBase):
    """A long short-term memory over whole sequences, as PyTorch's nn.LSTM: input, forget
    and output gates, c' = f * c + i * g, h' = o * tanh(c'). The state is the pair (h, c);
    shapes as RNN's, forward returns (output, (h_n, c_n)).

    With ``proj_size`` > 0 (smaller than ``hidden_size``), h' is projected, h' = h' W_hr^T
    (a ``weight_hr_l{k}`` of shape (proj_size, hidden_size) per layer and direction): h, the
    output and the next layer's input are proj_size wide, c stays hidden_size wide."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device=device, dtype=dtype)


class RNNCellBase(Module):
    """One step of RNN, GRU or LSTM (``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh``)."""

    def __init__(self, mode, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__()
        _check_sizes(type(self).__name__, input_size, hidden_size)
        self.mode, self.input_size, self.hidden_size, self.bias = (mode, input_size,
                                                                   hidden_size, bias)
        gates = _GATES[mode] * hidden_size
        kw = dict(device=device, dtype=dtype)
        self.weight_ih = Parameter(mg.empty(gates, input_size, **kw))
        self.weight_hh = Parameter(mg.empty(gates, hidden_size, **kw))
        self.bias_ih = Parameter(mg.empty(gates, **kw)) if bias else None
        self.bias_hh = Parameter(mg.empty(gates, **kw)) if bias else None
        RNNBase.reset_parameters(self)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            s += ", bias=False"
        if self.mode == "RNN_RELU":
            s += ", nonlinearity=relu"
        return s

    def forward(self, input, hx=None):
        name, lstm = type(self).__name__, self.mode == "LSTM"
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D "
                             f"instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[-1]} "
                               f"expected {self.input_size}")
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        shape = (x.shape[0], self.hidden_size)
        states = [None, None] if hx is None else list(hx) if lstm else [hx, None]
        for i in range(2 if lstm else 1):
            h = states[i]
            if h is None:
                states[i] = mg.zeros(*shape, dtype=x.dtype, device=x.device)
                continue
            h = h if batched else h.unsqueeze(0)
            if h.shape[0] != shape[0]:
                raise RuntimeError(f"Input batch size {shape[0]} doesn't match hidden{i} "
                                   f"batch size {h.shape[0]}")
            if h.shape[1] != shape[1]:
                raise RuntimeError(f"hidden{i} has inconsistent hidden_size: got "
                                   f"{h.shape[1]}, expected {shape[1]}")
            states[i] = h
        h, c = _STEPS[self.mode](F.linear(x, self.weight_ih, self.bias_ih), states[0],
                                 states[1], self.weight_hh, self.bias_hh)
        if not batched:
            h, c = h.squeeze(0), (c.squeeze(0) if lstm else None)
        return (h, c) if lstm else h


class RNNCell(RNNCellBase):
    """One step of RNN: h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu)."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, bias, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity


class GRUCell(RNNCellBase):
    """One step of GRU."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, bias, device=device, dtype=dtype)


class LSTMCell(RNNCellBase):
    """One step of LSTM: forward(input, (h, c)) -> (h', c')."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, bias, device=device, dtype=dtype)
