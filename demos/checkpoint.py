"""Training checkpoints: everything a run needs to continue, in one atomic file.

``save_checkpoint`` writes one safetensors file with ``nn.save`` (temporary file, fsync,
rename: a crash or Ctrl-C never leaves half a checkpoint):

- tensors: the model's state dict under ``model.<key>`` and the optimiser's per-parameter
  state tensors under ``optimizer.state.<index>.<name>`` (``exp_avg``, ...), with the
  optimiser's parameter numbering (PyTorch's state-dict layout);
- metadata (text, as safetensors allows): one JSON document under ``minigrad.training``
  with the step, the optimiser's param groups and non-tensor state (``step`` counts), the
  scheduler's state dict, the random generator's state (``mg.get_rng_state()``) and
  whatever JSON ``extra`` the caller adds (arguments, history, timings).

``load_checkpoint`` restores them in place. A model of another size is refused before
anything is copied, with an error that names the first mismatched key and both shapes.
"""
import contextlib
import json

import minigrad as mg
from minigrad import nn
META_KEY = "minigrad.training"
_MODEL, _OPTIM = "model.", "optimizer.state."


class CheckpointMismatch(ValueError):
    """The checkpoint's tensors do not fit the model (another size or architecture)."""


def save_checkpoint(path, model, optimizer, scheduler, step, extra=None):
    """Write the training state after ``step`` updates to ``path``, atomically.

    Args:
        model, optimizer, scheduler: an nn.Module, an mg.optim optimiser and its
            lr_scheduler (or None).
        step: the number of updates done.
        extra: a JSON-serialisable dict stored alongside (given back by load_checkpoint).
    """
    tensors = {_MODEL + k: v for k, v in model.state_dict().items()}
    opt = optimizer.state_dict()
    plain_state = {}
    for index, per_param in opt["state"].items():
        plain_state[str(index)] = {}
        for name, value in per_param.items():
            if isinstance(value, mg.Tensor):
                tensors[f"{_OPTIM}{index}.{name}"] = value
            else:
                plain_state[str(index)][name] = value
    meta = {"step": step,
            "optimizer": {"param_groups": opt["param_groups"], "state": plain_state},
            "scheduler": None if scheduler is None else scheduler.state_dict(),
            "rng": mg.get_rng_state(),
            "extra": extra or {}}
    nn.save(tensors, path, metadata={META_KEY: json.dumps(meta)})


def load_checkpoint(path, model, optimizer=None, scheduler=None, device="cpu",
                    restore_rng=False):
    """Restore ``model`` (and the optimiser and scheduler, when given, and with
    ``restore_rng`` the random generator) from ``path``; returns the saved metadata:
    ``step``, ``extra``, ...

    Raises:
        FileNotFoundError: no file at ``path``.
        ValueError: the file is not a valid checkpoint (a tensor that is neither the
            model's nor the optimiser's), or its optimiser, scheduler or random state does
            not fit (named with its path; see ``Optimizer.load_state_dict``).
        CheckpointMismatch: the model's keys or shapes differ from the checkpoint's.
    """
    tensors, metadata = nn.load(path, device=device, with_metadata=True)
    meta = _training_meta(path, metadata)
    stray = [key for key in tensors if not key.startswith((_MODEL, _OPTIM))]
    if stray:  # a damaged header: the tensor was the model's or the optimiser's
        more = f" (and {len(stray) - 1} more)" if len(stray) > 1 else ""
        raise ValueError(f"{path}: holds a tensor {stray[0]!r}{more} that is neither the "
                         f"model's ({_MODEL}...) nor the optimiser's ({_OPTIM}...)")
    model_sd = {k[len(_MODEL):]: v for k, v in tensors.items() if k.startswith(_MODEL)}
    check_fits(model, model_sd, path)
    restore_scheduler = scheduler is not None and meta["scheduler"] is not None
    if restore_scheduler and hasattr(scheduler, "_check_state_dict"):
        with _named(path, "the scheduler's state"):  # before the optimiser changes
            scheduler._check_state_dict(meta["scheduler"])
    if optimizer is not None:
        with _named(path, "the optimiser's state"):
            state = {int(i): dict(s) for i, s in meta["optimizer"]["state"].items()}
            for key, value in tensors.items():
                if key.startswith(_OPTIM):
                    index, name = key[len(_OPTIM):].split(".", 1)
                    state.setdefault(int(index), {})[name] = value
            optimizer.load_state_dict({"state": state,
                                       "param_groups": meta["optimizer"]["param_groups"]})
    if restore_scheduler:
        with _named(path, "the scheduler's state"):
            scheduler.load_state_dict(meta["scheduler"])
    model.load_state_dict(model_sd)  # last: a refused optimiser or scheduler leaves it as it was
    if restore_rng:
        with _named(path, "the random generator's state"):
            mg.set_rng_state(meta["rng"])
    return meta


def read_training_meta(path):
    """The metadata ``load_checkpoint`` would return (``step``, ``extra``, ...), without a
    model: what a program reads first to build the model that fits (its arguments, its
    tokenizer). Raises as load_checkpoint."""
    _, metadata = nn.load(path, with_metadata=True)
    return _training_meta(path, metadata)


# the fields of the metadata, and what each holds
_FIELDS = {"step": int, "optimizer": dict, "scheduler": (dict, type(None)), "rng": dict,
           "extra": dict}


def _training_meta(path, metadata):
    """The training metadata in a safetensors file's ``metadata``, checked for the fields
    save_checkpoint writes; ValueError naming ``path`` if it is not there or not whole."""
    if META_KEY not in metadata:
        raise ValueError(f"{path}: a safetensors file, but not a training checkpoint "
                         f"(no {META_KEY!r} metadata)")
    try:
        meta = json.loads(metadata[META_KEY])
    except ValueError as e:
        raise ValueError(f"{path}: its {META_KEY!r} metadata is not JSON ({e})") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{path}: its {META_KEY!r} metadata is a {type(meta).__name__}, "
                         "not a JSON object")
    for field, kind in _FIELDS.items():
        if field not in meta:
            raise ValueError(f"{path}: its {META_KEY!r} metadata has no {field!r}")
        if not isinstance(meta[field], kind) or isinstance(meta[field], bool):
            raise ValueError(f"{path}: {field!r} in its {META_KEY!r} metadata is a "
                             f"{type(meta[field]).__name__}")
    if not isinstance(meta["optimizer"].get("state"), dict) \
            or not isinstance(meta["optimizer"].get("param_groups"), list):
        raise ValueError(f"{path}: 'optimizer' in its {META_KEY!r} metadata has no 'state' "
                         "and 'param_groups'")
    return meta


@contextlib.contextmanager
def _named(path, what):
    """Turn an error restoring ``what`` from the checkpoint at ``path`` into a ValueError
    that names both."""
    try:
        yield
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as e:
        raise ValueError(f"{path}: {what} does not fit ({type(e).__name__}: {e})") from None


def check_fits(model, state_dict, path):
    """Raise CheckpointMismatch, naming the first differing key and its shapes, unless
    ``state_dict`` has exactly the model's keys and shapes."""
    own = model.state_dict()
    problems = []
    for key, value in own.items():
        if key not in state_dict:
            problems.append(f"{key} (shape {tuple(value.shape)} in the model) is missing from "
                            "the checkpoint")
        elif tuple(state_dict[key].shape) != tuple(value.shape):
            problems.append(f"{key} has shape {tuple(state_dict[key].shape)} in the checkpoint "
                            f"but {tuple(value.shape)} in the model")
    problems += [f"{key} (shape {tuple(state_dict[key].shape)} in the checkpoint) is not in "
                 "the model" for key in state_dict if key not in own]
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise CheckpointMismatch(f"{path} does not fit this model: {problems[0]}{more}")
