"""Many clients in one graph call: the client step vectorised over a leading client axis.

``build_stacked_training`` returns a ``tf.function`` that trains a group of C clients at
once. Their batches are stacked ``[C, S, B, ...]`` (S: the most steps any client of the
group takes over its local epochs; B: the batch size) with a mask that marks each
client's real examples, so every client sees exactly its own batches: a padded example
adds nothing to a loss, a gradient or a metric, and a step with no real example leaves
the client's weights and optimiser state as they were. Each step runs the *unmodified*
Keras model once per client under ``tf.vectorized_map``, with the client's weight tensors
put in place of the model's variables for the call (``substituted``); ``pfor`` turns the
per-client matmuls into batched ones (convolutions fall back to a loop inside the graph).

The arithmetic is the client work's (``client_work.build_local_training``): the mean
per-example loss of the client parts over the batch's real examples, the same
``client_step.train_step`` (the one place a client's gradient is taken), the update
``initial - trained``; tests hold the two equal.

Parts whose ``start`` reads the received model's logits (``Needs.received_logits``:
FedEFC's transition matrices) are stacked too: the received model runs in inference mode
on every client's examples of that pass at once, each client's ``start`` runs on its own
rows (in the pass's order, as the kernel computes them) and its context enters its
steps, and the parts' reported metrics (``Needs.metrics``) come back per client.
The logits of one big batch equal the kernel's batch-by-batch ones to rounding, not
bit for bit.

The traced step depends on the model's architecture, the optimiser, the parts and the
weight decay, never on a run's weights (they are arguments), so ``shared_stacked_training``
keeps one per process for each combination: the compared methods that train alike (FedAvg
and FedDS, a grid's seeds) trace it once.

Only what is exact when stacked is stacked (``unstackable_reason``): client parts that
declare it (``Needs.stackable``: a per-example loss, no state, a ``start`` that reads
only the received logits), and models whose forward pass in training depends on nothing
but the weights and the example (no BatchNorm batch statistics, no dropout, no
regularisation losses).
"""

import collections
import contextlib
import json

import numpy as np
import tensorflow as tf

from tff_noisy.federated import client_data as client_data_lib
from tff_noisy.federated import client_step as client_step_lib
from tff_noisy.federated import client_work
from tff_noisy.federated.client_parts import ClientContext, ClientProgram

# Layers whose training-mode output depends on more than the weights and the example.
_BATCH_DEPENDENT_LAYERS = (tf.keras.layers.BatchNormalization, tf.keras.layers.Dropout,
                           tf.keras.layers.GaussianNoise, tf.keras.layers.GaussianDropout,
                           tf.keras.layers.AlphaDropout)


def _variable_owners(model: tf.keras.Model) -> dict:
  """``{id(variable): [(layer, attribute), ...]}`` for the model's variables."""
  owners = collections.defaultdict(list)
  for layer in model.submodules:
    for name, value in vars(layer).items():
      if isinstance(value, tf.Variable):
        owners[id(value)].append((layer, name))
  return owners


@contextlib.contextmanager
def substituted(model: tf.keras.Model, values):
  """Within the block, the model's layers read ``values`` (``ModelWeights`` of tensors,
  in ``client_work.model_weights_of(model)``'s order) in place of their variables."""
  owners = _variable_owners(model)
  weights = client_work.model_weights_of(model)
  swapped = []
  try:
    for variable, value in zip(tf.nest.flatten(weights), tf.nest.flatten(values)):
      for layer, name in owners[id(variable)]:
        object.__setattr__(layer, name, value)  # Bypasses Keras' variable tracking.
        swapped.append((layer, name, variable))
    yield
  finally:
    for layer, name, variable in swapped:
      object.__setattr__(layer, name, variable)


def weight_regularizers(model: tf.keras.Model) -> list:
  """``[(index in model.trainable_variables, regularizer)]`` of the model's regularisation
  losses, found by Keras' convention (a layer's ``kernel`` is regularised by its
  ``kernel_regularizer``, and so on), so they can be applied to substituted weights.

  Raises ValueError when they do not account for every loss in ``model.losses``.
  """
  owners = _variable_owners(model)
  found = []
  for index, variable in enumerate(model.trainable_variables):
    for layer, name in owners.get(id(variable), []):
      regularizer = getattr(layer, f'{name}_regularizer', None)
      if regularizer is not None:
        found.append((index, regularizer))
  expected = float(tf.add_n(model.losses)) if model.losses else 0.0
  total = sum(float(r(model.trainable_variables[i])) for i, r in found)
  if len(found) != len(model.losses) or abs(total - expected) > 1e-6 * max(1.0, expected):
    raise ValueError(f'{len(model.losses)} regularisation losses, {len(found)} found on '
                     'weight attributes')
  return found


def unstackable_reason(model: tf.keras.Model, program: ClientProgram) -> str:
  """Why clients of ``program`` on ``model`` cannot be stacked ('' when they can): a part
  not declared stackable (``Needs.stackable``), or a model whose training-mode forward
  pass depends on more than its weights and the example."""
  reason = program.unstackable_reason()
  if reason:
    return reason
  for layer in model.submodules:
    if isinstance(layer, _BATCH_DEPENDENT_LAYERS):
      return (f'model layer {layer.name} ({type(layer).__name__}) depends on more than '
              'the weights and the example in training')
  try:
    weight_regularizers(model)
  except ValueError as e:
    return f'the model\'s regularisation losses are not per weight ({e})'
  owners = _variable_owners(model)
  for variable in model.variables:
    if not owners.get(id(variable)):
      return f'model variable {variable.name} is not a layer attribute'
  return ''


def _client_contexts(model, program: ClientProgram, weights, batches, mask, hparams):
  """Each client's context (the parts' ``start`` on the received ``weights``' logits of
  its real examples in ``batches``, ``[C, P, B, ...]``, the pass they read) and its
  reported metrics: two structures of ``[C, ...]`` tensors."""
  x = batches['x']
  rows = tf.concat([[-1], tf.shape(x)[3:]], 0)
  with substituted(model, weights):
    logits = model(tf.reshape(x, rows), training=False)
  num_clients = tf.shape(mask)[0]
  logits = tf.reshape(logits, [num_clients, -1, tf.shape(logits)[-1]])
  labels = tf.reshape(tf.cast(batches['y'], tf.int64), [num_clients, -1])
  real = tf.reshape(mask, [num_clients, -1])

  def of_client(c):
    ctx = ClientContext(hparams, logits=tf.boolean_mask(logits[c], real[c]),
                        labels=tf.boolean_mask(labels[c], real[c]))
    program.start(ctx)
    return ctx.values(), dict(ctx.metrics)

  signature = tf.nest.map_structure(lambda t: tf.TensorSpec(t.shape, t.dtype),
                                    of_client(0))
  return tf.map_fn(of_client, tf.range(num_clients), fn_output_signature=signature)


def _masked_sums(batch, real, per_example, logits, count):
  """``[loss sum, correct, examples, aggregation weight]`` of a step's real examples."""
  per_example = tf.where(real, per_example, tf.zeros_like(per_example))
  predicted = tf.argmax(logits, axis=-1, output_type=tf.int64)
  correct = tf.reduce_sum(tf.cast(
      tf.logical_and(real, tf.equal(predicted, tf.cast(batch['y'], tf.int64))), tf.float32))
  if client_work.AGGREGATION_WEIGHT_KEY in batch:
    weight = tf.reduce_sum(tf.where(
        real, tf.cast(batch[client_work.AGGREGATION_WEIGHT_KEY], tf.float32), 0.0))
  else:
    weight = count
  return tf.stack([tf.reduce_sum(per_example), correct, count, weight])


def build_stacked_training(model: tf.keras.Model, optimizer, program: ClientProgram,
                           weight_decay: float = 0.0):
  """A ``tf.function`` training a group of stacked clients (module doc).

  ``(initial_weights, hparams, batches, mask, prologue_batches, prologue_mask) ->
  (updates, sums, metrics)``: ``batches`` maps each dataset field to ``[C, S, B, ...]``,
  ``mask`` is ``[C, S, B]`` bool; ``prologue_batches`` and ``prologue_mask`` are the
  same of the pass the parts' ``start`` reads (no steps when none reads it this round);
  ``updates`` are ``initial - trained`` stacked per client (``ModelWeights`` of
  ``[C, ...]``), ``sums`` the per-client ``loss_sum``, ``correct``, ``num_examples`` and
  ``weight_sum`` (the aggregation weight summed over every pass) and ``metrics`` the
  parts' reported ones, as ``[C]`` tensors.
  """
  weights = client_work.model_weights_of(model)
  trainable_specs = tuple(tf.TensorSpec(v.shape, v.dtype) for v in weights.trainable)
  regularizers = weight_regularizers(model)
  reads_logits = program.reads_received_logits()

  @tf.function(reduce_retracing=True)  # Should a round bring other fields (see below).
  def train(initial_weights, hparams, batches, mask, prologue_batches, prologue_mask):
    num_clients = tf.shape(mask)[0]
    initial_trainable = tuple(tf.convert_to_tensor(w) for w in initial_weights.trainable)
    non_trainable = tuple(tf.convert_to_tensor(w) for w in initial_weights.non_trainable)
    contexts, metrics = {}, {}
    if reads_logits:
      contexts, metrics = _client_contexts(model, program, initial_weights,
                                           prologue_batches, prologue_mask, hparams)

    def per_client(value):
      value = tf.convert_to_tensor(value)
      return tf.broadcast_to(value, tf.concat([[num_clients], tf.shape(value)], 0))

    client_step = _client_step(model, program, optimizer, weight_decay, regularizers,
                               hparams, initial_trainable, non_trainable)
    trainable = tuple(per_client(w) for w in initial_trainable)
    opt_state = tf.nest.map_structure(per_client, optimizer.initialize(trainable_specs))
    sums = tf.zeros([num_clients, 4])
    for step in tf.range(tf.shape(mask)[1]):
      batch = {name: value[:, step] for name, value in batches.items()}
      stepped, step_sums = tf.vectorized_map(
          client_step, (trainable, opt_state, batch, mask[:, step], contexts))
      trainable, opt_state = _where_stepped(tf.reduce_any(mask[:, step], axis=1), stepped,
                                            (trainable, opt_state))
      sums += step_sums
    updates = client_work.model_weights_of_values(
        [w[None] - t for w, t in zip(initial_trainable, trainable)],
        [tf.zeros_like(per_client(w)) for w in non_trainable])
    return updates, collections.OrderedDict(
        loss_sum=sums[:, 0], correct=sums[:, 1],
        num_examples=tf.cast(sums[:, 2], tf.int64), weight_sum=sums[:, 3]), metrics

  def train_group(initial_weights, hparams, batches, mask, prologue_batches, prologue_mask):
    args = (initial_weights, hparams, batches, mask, prologue_batches, prologue_mask)
    # Traced once for any number of clients and steps (groups and rounds differ in
    # both): the first call traces for arrays of unknown leading [clients, steps].
    if not train.experimental_get_tracing_count():
      specs = [tf.nest.map_structure(lambda t: tf.TensorSpec(np.shape(t), t.dtype), a)
               for a in args[:2]]
      specs += [tf.nest.map_structure(
          lambda a: tf.TensorSpec((None, None) + a.shape[2:], a.dtype), a) for a in args[2:]]
      train.get_concrete_function(*specs)
    return train(*args)

  return train_group


def _client_step(model, program: ClientProgram, optimizer, weight_decay: float,
                 regularizers, hparams, initial_trainable, non_trainable):
  """One client's step, vectorised over the stacked clients: ``(trainable, opt_state,
  batch, real, context) -> ((trainable, opt_state) after the step, sums)``; the caller
  keeps the old ones of a client with no real example in its batch (``_where_stepped``)."""

  def client_step(args):
    trainable, opt_state, batch, real, context = args
    ctx = ClientContext(hparams, values=context, initial_trainable=initial_trainable)
    count = tf.reduce_sum(tf.cast(real, tf.float32))

    def forward(x):
      with substituted(model, client_work.model_weights_of_values(trainable,
                                                                  non_trainable)):
        return None, model(x, training=True)

    def mean(per_example):
      per_example = tf.where(real, per_example, tf.zeros_like(per_example))
      return tf.reduce_sum(per_example) / tf.maximum(count, 1.0)

    regularization = None
    if regularizers:  # The model's own losses, on this client's weights.
      regularization = lambda: tf.add_n([r(trainable[i]) for i, r in regularizers])  # pylint: disable=unnecessary-lambda-assignment
    new_opt_state, new_trainable, _, per_example, logits = client_step_lib.train_step(
        forward, trainable, program, optimizer, opt_state, batch, ctx, weight_decay,
        mean=mean, regularization=regularization)
    return ((tuple(new_trainable), new_opt_state),
            _masked_sums(batch, real, per_example, logits, count))

  return client_step


def _where_stepped(stepped, new, old):
  """Each client's ``new`` weights and optimiser state where ``stepped`` (bool ``[C]``: the
  step had a real example of the client), its ``old`` ones elsewhere. When every client
  stepped that is ``new`` itself, without a select's pass over every stacked weight."""

  def select(new_value, old_value):
    where = tf.reshape(stepped, tf.concat([[-1], tf.ones_like(tf.shape(new_value)[1:])], 0))
    return tf.where(where, new_value, old_value)

  return tf.cond(tf.reduce_all(stepped), lambda: new,
                 lambda: tf.nest.map_structure(select, new, old))


class _Unshareable(Exception):
  """A value that cannot be compared between runs (``shared_stacked_training``)."""


def _fingerprint(value):
  """A hashable value equal for equal plain data (numbers, strings, arrays, specs and
  containers of them); _Unshareable for anything else (a callable, an object)."""
  if value is None or isinstance(value, (bool, int, float, str, np.generic)):
    return (type(value).__name__, value)
  if isinstance(value, np.ndarray):
    return ('array', value.dtype.str, value.shape, value.tobytes())
  if isinstance(value, tf.TensorSpec):
    return ('spec', str(value.dtype), tuple(value.shape.as_list() or ()))
  if isinstance(value, (list, tuple)):
    return (type(value).__name__, tuple(_fingerprint(v) for v in value))
  if isinstance(value, dict):
    return ('dict', tuple(sorted((str(k), _fingerprint(v)) for k, v in value.items())))
  raise _Unshareable(type(value).__name__)


def _architecture(model: tf.keras.Model) -> str:
  """The model's Keras config as JSON with its layers' names replaced by their order (two
  builds of one architecture differ only in names: ``dense`` then ``dense_1``)."""
  try:
    text = json.dumps(model.get_config(), sort_keys=True)
  except (NotImplementedError, TypeError) as e:  # Subclassed models, custom objects.
    raise _Unshareable(str(e)) from None
  for index, layer in enumerate([model, *model.submodules]):
    text = text.replace(json.dumps(layer.name), json.dumps(f'#layer{index}'))
  shapes = [(tuple(v.shape), v.dtype.name) for v in model.variables]
  return text + json.dumps(shapes)


_SHARED = {}  # shared_stacked_training's traced functions, by what they depend on.


def shared_stacked_training(model: tf.keras.Model, optimizer, program: ClientProgram,
                            weight_decay: float = 0.0):
  """``build_stacked_training``, kept for the process: a later run with the same model
  architecture, optimiser (type and settings), client parts (types and settings) and
  weight decay gets the function already traced. Anything that cannot be compared (a
  subclassed model, a part holding a callable) gets a function of its own."""
  try:
    key = (_architecture(model), type(optimizer), _fingerprint(vars(optimizer)),
           tuple((type(p), _fingerprint(vars(p))) for p in program.parts),
           float(weight_decay))
  except _Unshareable:
    return build_stacked_training(model, optimizer, program, weight_decay)
  if key not in _SHARED:
    _SHARED[key] = build_stacked_training(model, optimizer, program, weight_decay)
  return _SHARED[key]


def stack_batches(clients, orders, batch_size: int, passes: int):
  """``(batches, mask)`` of a group of ``ClientData`` in their batch ``orders``.

  Client c's examples ``orders[c]`` (every pass, ``client_data.batch_orders``) are cut
  into batches of ``batch_size`` that restart at each pass, as ``dataset().repeat()``
  yields them; the group is padded to its longest client.
  """
  sizes = np.array([c.num_examples for c in clients], np.int64)
  per_pass = np.array([client_data_lib.steps_per_pass(n, batch_size) for n in sizes],
                      np.int64)
  # No pass (a prologue that reads nothing this round): no step, so no padding to carry.
  num_steps = int(max(passes * per_pass.max(initial=0), 1)) if passes else 0
  fields = clients[0].features
  batches = {name: np.zeros((len(clients), num_steps, batch_size, *value.shape[1:]),
                            value.dtype) for name, value in fields.items()}
  mask = np.zeros((len(clients), num_steps, batch_size), bool)
  lengths = np.array([len(order) for order in orders], np.int64)
  if not lengths.sum():
    return batches, mask
  # Every client's orders at once: the owner of each position, its place in its client's
  # order, and from that its slot in the [steps, batch] grid (a pass starts a batch).
  owner = np.repeat(np.arange(len(clients)), lengths)
  position = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
  pass_index, within = np.divmod(position, sizes[owner])
  step = pass_index * per_pass[owner] + within // batch_size
  slot = within % batch_size
  mask[owner, step, slot] = True
  rows = (np.cumsum(sizes) - sizes)[owner] + np.concatenate(orders)
  for name in fields:
    batches[name][owner, step, slot] = np.concatenate(
        [c.features[name] for c in clients])[rows]
  return batches, mask


def prologue_pass(program: ClientProgram, hparams) -> bool:
  """Whether this round's clients make the pass of received logits the parts read."""
  return program.reads_received_logits() and bool(program.received_logits_needed(hparams))


def stack_round(clients, batch_size: int, local_epochs: int, prologue_pass: bool) -> tuple:
  """``(batches, mask, prologue_batches, prologue_mask)`` of a group's round, for
  ``build_stacked_training``: with ``prologue_pass`` (the client parts read the received
  model's logits this round), the pass of the prologue draws each client's first shuffle,
  as in the kernel, and training the next ``local_epochs``; without, the prologue's
  batches have no step."""
  passes = int(prologue_pass)
  orders = client_data_lib.batch_orders(clients, passes + local_epochs)
  first = [order[:c.num_examples * passes] for c, order in zip(clients, orders)]
  rest = [order[c.num_examples * passes:] for c, order in zip(clients, orders)]
  return (*stack_batches(clients, rest, batch_size, local_epochs),
          *stack_batches(clients, first, batch_size, passes))
