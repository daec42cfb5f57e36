"""The client's round as a TFLite model with training signatures (on-device federated clients).

``build_training_module`` wraps a Keras model in a ``tf.Module`` whose ``tf.function``
signatures are one client's local training: its ``train`` and ``upload`` run the very
functions of the simulation's client kernel (``tff_noisy.federated.client_step``:
``train_step``, ``zero_if_any_non_finite``) on the method's client parts, which supply
their own device side (``client_parts.DeviceForm``: its context, start and metrics):

- ``restore(w000, w001, ...)``: receive the broadcast global model (trainable then
  non-trainable variables, ``tff.learning.models.ModelWeights`` order). Also keeps a copy
  (FedProx's proximal centre and the update's reference), starts the client optimiser's
  state afresh (as every TFF round does) and clears the round's counters.
- ``prologue(x, y, <hparams>)`` (parts with a device context: forward correction):
  the parts' device ``start`` with the received model in inference mode over the
  client's whole local set and the round's hparams (forward correction: ``corrected``;
  when it is 1, the client's own transition matrix Q^k, FedEFC's confident joint or
  Patrini's anchors, the same TF code as the simulation). Returns the context (``matrix``)
  and what the host reads (the received model's accuracy, the estimate).
  ``set_context(<context>, <hparams>)`` (``matrix``, ``corrected``) sets them directly.
- ``train(x, y, aggregation_weight)``: one optimiser step on a batch: the parts'
  mean per-example loss plus the model's regularisation losses, FedProx's proximal
  gradient ``mu (w - w_restored)`` and the coupled ``weight_decay * w``, stepped by the
  run's ``tff.learning.optimizers`` optimiser itself (its ``next``, on state held in
  variables). ``aggregation_weight`` is the per-example weight (ones unless the method
  weights clients, e.g. NA-FedAvg's ``1 - n_hat``). Returns the mean loss, the summed
  per-example loss and the number of correct predictions.
- ``upload()``: what the client sends: ``u000, ...`` = restored - trained (every variable)
  and ``update_weight`` = sum of ``aggregation_weight`` over the round's ``train`` calls /
  ``local_epochs``, zeros and weight 0 when the update has a non-finite value (as TFF's
  client work), plus ``non_finite`` and ``num_examples``.
- ``parameters()``: the local model's variables ``w000, ...``; ``infer(x)``: logits.

A round on a device: ``restore`` -> [``prologue``] -> ``local_epochs`` passes of ``train``
over its batches -> ``upload``. The model converts with TFLite builtins plus select TF ops
and resource variables, so only a runtime that links the select-TF-ops (Flex) delegate
runs ``train``: the full TensorFlow pip's ``tf.lite.Interpreter`` or Android with the
``tensorflow-lite-select-tf-ops`` library; ``tflite-runtime``/LiteRT alone run ``infer``
only (``RUNTIME_NOTE``).
"""

import re
from typing import Callable, Optional

import numpy as np
import tensorflow as tf

from tff_noisy import methods
from tff_noisy.errors import ConfigError
from tff_noisy.federated import client_step
from tff_noisy.federated.client_parts import ClientContext, ClientProgram, CrossEntropy

RUNTIME_NOTE = (
    'needs a TFLite runtime with the select-TF-ops (Flex) delegate: the full TensorFlow '
    "pip's tf.lite.Interpreter, or Android with org.tensorflow:tensorflow-lite-select-tf-ops "
    "beside tensorflow-lite; tflite-runtime / LiteRT alone run only 'infer' (checked on "
    'TF 2.14: tflite-runtime 2.14 and ai-edge-litert 2.3)')
AGGREGATION_WEIGHT_KEY = 'aggregation_weight'  # As client_work's (no TFF import here).
SIGNATURES = ('restore', 'train', 'upload', 'parameters', 'infer')
# Of client parts with a device start (``client_parts.DeviceForm.context``).
CONTEXT_SIGNATURES = ('prologue', 'set_context')


def weight_name(i: int) -> str:
  return f'w{i:03d}'


def update_name(i: int) -> str:
  return f'u{i:03d}'


def check_program(program: ClientProgram) -> None:
  """Raises ConfigError unless every client part can run on a device
  (``ClientProgram.device_reason``; each method's ``MethodSpec.off_device`` agrees)."""
  reason = program.device_reason()
  if reason:
    raise ConfigError(f'these client parts cannot be exported for on-device training: '
                      f'{reason}; {methods.device_support()}')


def _signature(name: str, body: Callable, input_signature: list):
  """``tf.function(body)`` named ``name``: the TFLite signature key is the function's name."""

  def function(*args):
    return body(*args)

  function.__name__ = name
  return tf.function(function, input_signature=input_signature)


def _variables(model):
  return list(model.trainable_variables) + list(model.non_trainable_variables)


def _spec(name: str, value) -> tf.TensorSpec:
  value = np.asarray(value)
  return tf.TensorSpec(value.shape, value.dtype, name=name)


class TrainingModule(tf.Module):
  """One client's local training on ``model`` (see the module docstring)."""

  def __init__(self, model: tf.keras.Model, program: ClientProgram, optimizer, *,
               local_epochs: int = 1, weight_decay: float = 0.0,
               training_forward: bool = True):
    super().__init__(name='client')
    check_program(program)
    self.model = model
    self.program = program
    self.optimizer = optimizer
    self.local_epochs = int(local_epochs)
    self.weight_decay = float(weight_decay)
    # False: the forward pass in training runs in inference mode (no dropout): only for
    # checking parity of a dropout model, whose random masks cannot match TFF's.
    self.training_forward = bool(training_forward)
    self.trainable = list(model.trainable_variables)
    self.all_variables = _variables(model)
    self.received = [tf.Variable(v, trainable=False, name=f'received_{i}')
                     for i, v in enumerate(self.all_variables)]
    self._trainable_specs = tuple(tf.TensorSpec(v.shape, v.dtype) for v in self.trainable)
    self.opt_state = tf.nest.map_structure(
        lambda t: tf.Variable(t, trainable=False),
        optimizer.initialize(self._trainable_specs))
    self.weight_sum = tf.Variable(0.0, trainable=False, name='weight_sum')
    self.num_examples = tf.Variable(0, dtype=tf.int32, trainable=False, name='num_examples')
    # The parts' context and the server's hparams, as the device holds them, and the
    # values a round starts from.
    self._held_initial = {**program.device_context, **program.hparams}
    self.held = {name: tf.Variable(value, trainable=False, name=name)
                 for name, value in self._held_initial.items()}
    self.has_context = bool(program.device_context)
    input_shape = tuple(model.inputs[0].shape[1:])
    x_spec = tf.TensorSpec([None, *input_shape], tf.float32, name='x')
    y_spec = tf.TensorSpec([None], tf.int32, name='y')
    w_spec = tf.TensorSpec([None], tf.float32, name=AGGREGATION_WEIGHT_KEY)
    self.weight_specs = [tf.TensorSpec(v.shape, v.dtype, name=weight_name(i))
                         for i, v in enumerate(self.all_variables)]
    self.restore = _signature('restore', self._restore, self.weight_specs)
    self.train = _signature('train', self._train, [x_spec, y_spec, w_spec])
    self.upload = _signature('upload', self._upload, [])
    self.parameters = _signature('parameters', self._parameters, [])
    self.infer = _signature('infer', self._infer, [x_spec])
    if self.has_context:
      hparam_specs = [_spec(n, v) for n, v in program.hparams.items()]
      self.prologue = _signature('prologue', self._prologue, [x_spec, y_spec, *hparam_specs])
      self.set_context = _signature('set_context', self._set_context, [
          _spec(n, v) for n, v in program.device_context.items()] + hparam_specs)

  def signatures(self) -> dict:
    names = SIGNATURES + (CONTEXT_SIGNATURES if self.has_context else ())
    return {name: getattr(self, name).get_concrete_function() for name in names}

  # The signatures' bodies.

  def _restore(self, *weights):
    for variable, received, value in zip(self.all_variables, self.received, weights):
      variable.assign(value)
      received.assign(value)
    tf.nest.map_structure(lambda v, t: v.assign(t), self.opt_state,
                          self.optimizer.initialize(self._trainable_specs))
    self.weight_sum.assign(0.0)
    self.num_examples.assign(0)
    for name, value in self._held_initial.items():
      self.held[name].assign(value)
    return {'restored': tf.constant(len(weights), tf.int32)}

  def _held(self, names) -> dict:
    return {name: self.held[name].read_value() for name in names}

  def _train(self, x, y, aggregation_weight):
    forward = lambda x: (None, self.model(x, training=self.training_forward))  # pylint: disable=unnecessary-lambda-assignment
    opt_state = tf.nest.map_structure(lambda v: v.read_value(), self.opt_state)
    initial = [r.read_value() for r in self.received[:len(self.trainable)]]
    ctx = ClientContext(self._held(self.program.hparams),
                        values=self._held(self.program.device_context),
                        initial_trainable=initial)
    opt_state, new_trainable, loss, per_example, logits = client_step.train_step(
        forward, self.trainable, self.program, self.optimizer, opt_state, {'x': x, 'y': y},
        ctx, self.weight_decay, regularization=client_step.model_losses(self.model))
    for variable, value in zip(self.trainable, new_trainable):
      variable.assign(value)
    tf.nest.map_structure(lambda v, t: v.assign(t), self.opt_state, opt_state)
    self.weight_sum.assign_add(tf.reduce_sum(aggregation_weight))
    self.num_examples.assign_add(tf.shape(y)[0])
    predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)
    correct = tf.reduce_sum(tf.cast(tf.equal(predicted, y), tf.float32))
    return {'loss': loss, 'loss_sum': tf.reduce_sum(per_example), 'correct': correct}

  def _upload(self):
    update, non_finite = client_step.zero_if_any_non_finite(
        [r - v for r, v in zip(self.received, self.all_variables)])
    outputs = {update_name(i): u for i, u in enumerate(update)}
    outputs['update_weight'] = tf.where(non_finite, 0.0,
                                        self.weight_sum / float(self.local_epochs))
    outputs['non_finite'] = tf.cast(non_finite, tf.int32)
    outputs['num_examples'] = self.num_examples.read_value()
    return outputs

  def _parameters(self):
    return {weight_name(i): v.read_value() for i, v in enumerate(self.all_variables)}

  def _infer(self, x):
    return {'logits': self.model(x, training=False)}

  def _prologue(self, x, y, *hparam_values):
    hparams = dict(zip(self.program.hparams, hparam_values))
    outputs = self.program.device_start(lambda b: self.model(b, training=False), x, y,
                                        hparams)
    for name, value in {**hparams, **outputs}.items():
      if name in self.held:
        self.held[name].assign(value)
    return outputs

  def _set_context(self, *values):
    for name, value in zip(self._held_initial, values):
      self.held[name].assign(value)
    return self._held(self.program.device_context)


def build_training_module(model: tf.keras.Model, program: Optional[ClientProgram],
                          optimizer, *, local_epochs: int = 1, weight_decay: float = 0.0,
                          training_forward: bool = True) -> TrainingModule:
  """A ``TrainingModule`` on ``model`` (its current weights are the initial ones);
  ``program`` None: cross-entropy (FedAvg's clients)."""
  return TrainingModule(model, program or ClientProgram([CrossEntropy()]), optimizer,
                        local_epochs=local_epochs, weight_decay=weight_decay,
                        training_forward=training_forward)


def convert_training_module(module: TrainingModule) -> bytes:
  """The module as a TFLite flatbuffer: builtins + select TF ops, resource variables.

  Raises:
    ConfigError: the converter refuses an op (its message names it).
  """
  signatures = module.signatures()
  converter = tf.lite.TFLiteConverter.from_concrete_functions(
      list(signatures.values()), module)
  converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS,
                                         tf.lite.OpsSet.SELECT_TF_OPS]
  converter.experimental_enable_resource_variables = True
  try:
    return converter.convert()
  except Exception as e:  # pylint: disable=broad-except (the converter's own errors)
    names = ', '.join(type(p).__name__ for p in module.program.parts)
    raise ConfigError(f'model {module.model.name!r} with client parts {names} cannot be '
                      f'exported for on-device training: {_refused_ops(str(e))}') from None


def _refused_ops(message: str) -> str:
  """The converter's refusal in one line: the ops it names, else its last line."""
  found = re.findall(r'(?:Custom ops|ops that can be supported by the flex runtime[^:]*|'
                     r'ops that need custom implementation[^:]*): ([^\n]+)', message)
  if found:
    return ('the TFLite converter found op(s) that are neither TFLite builtins nor select '
            f'TF ops: {"; ".join(sorted(set(f.strip() for f in found)))}')
  lines = [line.strip() for line in message.splitlines() if line.strip()]
  return f'the TFLite converter refused it: {lines[-1] if lines else message}'


def needs_select_ops(tflite_bytes: bytes) -> bool:
  """True if some op needs the select-TF-ops (Flex) delegate (``convert.has_flex_ops``)."""
  from tflite_export import convert  # pylint: disable=g-import-not-at-top
  return convert.has_flex_ops(tflite_bytes)


def runtime_requirement(tflite_bytes: bytes) -> dict:
  """What runs the model's ``train``: the sidecar's ``runtime``."""
  from tflite_export import convert  # pylint: disable=g-import-not-at-top
  flex = sorted({n for n in convert.op_names(tflite_bytes) if n.startswith('Flex')})
  if flex:
    return {'select_tf_ops': True, 'flex_ops': flex,
            'note': f'train {RUNTIME_NOTE}'}
  return {'select_tf_ops': False, 'flex_ops': [],
          'note': ('TFLite builtins and resource variables only: any TFLite runtime with '
                   'resource-variable support runs every signature (the full TensorFlow '
                   "pip's tf.lite.Interpreter, tflite-runtime, Android's tensorflow-lite); "
                   'converted with select TF ops allowed, none was needed')}


def describe_program(program: ClientProgram) -> dict:
  """The client parts the sidecar records."""
  return program.describe()
