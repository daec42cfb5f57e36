"""Runs an on-device training model (``training.py``) in a TFLite interpreter: a device's
round as a phone app would run it, used by the simulation's ``fl.client_runtime: tflite``,
the tests and ``benchmarks/on_device.py``.

A round: ``restore`` the broadcast weights, ``prologue`` (forward correction only), then
``local_epochs`` passes of ``train`` over the client's batches in order, then ``upload``:
the update (received - trained, zeros when non-finite) and its weight, as the TFF client
work forms them.
"""

from typing import Iterable, List, Mapping, NamedTuple, Optional

import numpy as np
import tensorflow as tf

from tff_noisy.errors import UserError
from tflite_export import training


class RuntimeMissingSelectOps(UserError):
  """The interpreter lacks the select-TF-ops (Flex) delegate the model's ``train`` needs."""


class Upload(NamedTuple):
  update: List[np.ndarray]  # received - trained, every variable, ModelWeights order.
  update_weight: float  # sum of aggregation_weight / local_epochs; 0 when non-finite.
  non_finite: bool
  num_examples: int  # Examples trained on, over every epoch.
  loss_sum: float  # Sum of per-example losses, over every epoch.
  correct: float  # Correct training predictions, over every epoch.
  prologue: dict  # The prologue's outputs (forward correction), else {}.


def _needs_select_ops(error: Exception) -> bool:
  """TFLite's own message for a Flex op without the delegate (every runtime says it)."""
  return 'Select TensorFlow op' in str(error) or 'Flex delegate' in str(error)


def _missing_select_ops(where: str) -> RuntimeMissingSelectOps:
  return RuntimeMissingSelectOps(
      f'{where}: this on-device training model uses select TF ops, which this TFLite '
      f'runtime lacks; it {training.RUNTIME_NOTE}')


class DeviceClient:
  """One device's training model in ``tf.lite.Interpreter``.

  Args:
    tflite_bytes: a model from ``training.convert_training_module``.
    num_threads: interpreter threads (None: TFLite's default).
    interpreter_class: the runtime: ``tf.lite.Interpreter`` (default; the full TensorFlow
      pip links the select-TF-ops delegate) or e.g. ``tflite_runtime.interpreter.
      Interpreter`` / ``ai_edge_litert.interpreter.Interpreter``, which lack it: a model
      with select TF ops then fails with ``RuntimeMissingSelectOps`` naming the runtime
      it needs.
  """

  def __init__(self, tflite_bytes: bytes, num_threads: Optional[int] = None,
               interpreter_class=None):
    interpreter_class = interpreter_class or tf.lite.Interpreter
    try:
      self.interpreter = interpreter_class(model_content=tflite_bytes,
                                           num_threads=num_threads)
    except (RuntimeError, ValueError) as e:
      if _needs_select_ops(e):
        raise _missing_select_ops(f'loading it in {interpreter_class.__module__}') from None
      raise
    signatures = self.interpreter.get_signature_list()
    missing = [s for s in training.SIGNATURES if s not in signatures]
    if missing:
      raise UserError(f'not an on-device training model: no signature {", ".join(missing)} '
                      f'(it has {", ".join(sorted(signatures)) or "none"}); export one with '
                      '`tff-noisy export RUN_DIR --on-device-training`')
    self.has_prologue = 'prologue' in signatures
    self._runners = {}
    for name in signatures:
      try:
        self._runners[name] = self.interpreter.get_signature_runner(name)
      except (RuntimeError, ValueError) as e:
        if _needs_select_ops(e):
          raise _missing_select_ops(f'signature {name!r}') from None
        raise
    # The variables' shapes before any restore: the model's own.
    initial = self._call('parameters')
    self.weight_shapes = [tuple(initial[training.weight_name(i)].shape)
                          for i in range(len(initial))]
    self.weight_dtypes = [initial[training.weight_name(i)].dtype
                          for i in range(len(initial))]

  def _call(self, name: str, **inputs) -> dict:
    try:
      return self._runners[name](**inputs)
    except (RuntimeError, ValueError) as e:
      if _needs_select_ops(e):
        raise _missing_select_ops(f'signature {name!r}') from None
      raise

  def restore(self, weights: List[np.ndarray]) -> None:
    """Receives the global model (``ModelWeights`` order: trainable, non-trainable)."""
    weights = list(weights)
    if len(weights) != len(self.weight_shapes):
      raise ValueError(f'restore: the model has {len(self.weight_shapes)} weight tensors, '
                       f'got {len(weights)}')
    inputs = {}
    for i, (value, shape, dtype) in enumerate(zip(weights, self.weight_shapes,
                                                  self.weight_dtypes)):
      value = np.asarray(value)
      if tuple(value.shape) != shape:
        raise ValueError(f'restore: weight {training.weight_name(i)} has shape '
                         f'{tuple(value.shape)}, the model\'s is {shape}')
      inputs[training.weight_name(i)] = value.astype(dtype, copy=False)
    self._call('restore', **inputs)

  def parameters(self) -> List[np.ndarray]:
    out = self._call('parameters')
    return [out[training.weight_name(i)] for i in range(len(out))]

  def infer(self, x: np.ndarray) -> np.ndarray:
    return self._call('infer', x=np.asarray(x, np.float32))['logits']

  def prologue(self, x: np.ndarray, y: np.ndarray, hparams: Mapping) -> dict:
    """The objective's prologue over the local set ``x``, ``y`` with the round's
    ``hparams`` (forward correction: ``{'corrected': 0 or 1}``): its outputs."""
    if not self.has_prologue:
      raise ValueError('this model\'s objective has no prologue (cross-entropy / FedProx)')
    return self._call('prologue', x=np.asarray(x, np.float32), y=np.asarray(y, np.int32),
                      **self._typed('prologue', hparams))

  def set_context(self, **values) -> dict:
    """Sets the objective's context and the round's hparams directly (forward
    correction: ``matrix=..., corrected=...``) instead of running the prologue."""
    return self._call('set_context', **self._typed('set_context', values))

  def _typed(self, signature: str, values: Mapping) -> dict:
    """``values`` in the dtypes ``signature`` takes; ValueError unless they name exactly
    its inputs (``x`` and ``y`` aside)."""
    details = self._runners[signature].get_input_details()
    names = [name for name in details if name not in ('x', 'y')]
    if set(values) != set(names):
      raise ValueError(f'{signature} takes {", ".join(sorted(names))}, got '
                       f'{", ".join(sorted(values)) or "none"}')
    return {name: np.asarray(values[name], details[name]['dtype']) for name in names}

  def train(self, x: np.ndarray, y: np.ndarray,
            aggregation_weight: Optional[np.ndarray] = None) -> dict:
    """One optimiser step on a batch; ``{'loss', 'loss_sum', 'correct'}``."""
    y = np.asarray(y)
    weight = (np.ones(len(y), np.float32) if aggregation_weight is None
              else np.asarray(aggregation_weight, np.float32))
    return self._call('train', x=np.asarray(x, np.float32), y=y.astype(np.int32),
                      aggregation_weight=weight)

  def upload(self) -> dict:
    return self._call('upload')

  def run_round(self, weights: List[np.ndarray], batches: Iterable[dict],
                hparams: Optional[Mapping] = None) -> Upload:
    """A whole round: restore, [prologue], ``train`` on every batch in order, upload.

    ``batches``: every batch of the round, all epochs in order (``dataset.repeat(E)``),
    each a mapping with ``x``, ``y`` and optionally ``aggregation_weight``. The
    prologue (with the round's ``hparams``, forward correction's ``corrected``) sees the
    examples of the first epoch (``num_examples`` / epochs of them, as the batches
    repeat).
    """
    batches = [{k: np.asarray(v) for k, v in b.items()} for b in batches]
    self.restore(weights)
    prologue = {}
    if self.has_prologue:
      if hparams is None:
        raise ValueError("this model's objective has a prologue: give the round's hparams")
      prologue = self.prologue(*self._first_epoch(batches), hparams)
    loss_sum, correct = 0.0, 0.0
    for batch in batches:
      out = self.train(batch['x'], batch['y'], batch.get(training.AGGREGATION_WEIGHT_KEY))
      loss_sum += float(out['loss_sum'])
      correct += float(out['correct'])
    out = self.upload()
    update = [out[training.update_name(i)] for i in range(len(self.weight_shapes))]
    return Upload(update=update, update_weight=float(out['update_weight']),
                  non_finite=bool(out['non_finite']),
                  num_examples=int(out['num_examples']), loss_sum=loss_sum,
                  correct=correct, prologue=prologue)

  def _first_epoch(self, batches: list):
    """x, y of one pass: batches until an example index repeats (or all of them)."""
    seen, xs, ys = set(), [], []
    for batch in batches:
      index = batch.get('index')
      if index is not None and seen.intersection(index.tolist()):
        break
      if index is not None:
        seen.update(index.tolist())
      xs.append(batch['x'])
      ys.append(batch['y'])
    return np.concatenate(xs), np.concatenate(ys)
