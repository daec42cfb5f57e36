"""Where the audio model's on-device parity gap comes from (``on_device.json``: 4e-2).

Run from the repository root: ``python -m benchmarks.audio_parity``. The round of
``benchmarks/on_device.py`` for ``audio`` (dropout off, seeded untrained weights, 128
waveforms of 0.1-std noise, random labels, 4 batches of 32, SGD 0.05), its TFLite
training model against the same steps in Keras (a ``tf.function``: the client part's loss
plus the model's losses, SGD; the TFF client work's maths):

- ``forward``: relative gap of the log-mel front end's output and of the logits;
- ``first_step``: the first step's update gap, per block (4 conv blocks, then the head),
  and per block how many ReLUs see a pre-activation of the other sign and how many 2x2
  max-pool windows pick another winner in TFLite than in TF (same input, same weights);
- ``round``: the gap after each step, free-running (the benchmark's round) and with every
  step started from Keras's weights (``resynced``); ``keras_perturbed``: Keras against
  Keras with the waveforms perturbed by 1e-7 relative (float32 rounding's size);
- ``smooth_round``: the same round with ReLU -> tanh and the max pools -> average pools
  (front end, RFFT and GroupNorm unchanged).

Results go to benchmarks/results/audio_parity.json.
"""

import json
import os
import pathlib

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top

# pylint: disable=g-import-not-at-top,protected-access (on_device's round, reused)
from benchmarks import on_device
from tff_noisy.federated.client_parts import CrossEntropy, Outputs
from tflite_export import device_client
from tflite_export import training

tff = on_device.tff
_OUT = pathlib.Path(__file__).parent / 'results' / 'audio_parity.json'
_LR, _BATCH, _EXAMPLES = on_device._LR, on_device._BATCH, on_device._EXAMPLES
_gap = on_device.relative_gap  # |got - want| / |want|: on_device.json's parity measure.
_SMOOTH = {tf.keras.layers.ReLU: lambda: tf.keras.layers.Activation('tanh'),
           tf.keras.layers.MaxPooling2D: lambda: tf.keras.layers.AveragePooling2D(2),
           tf.keras.layers.GlobalMaxPooling2D: tf.keras.layers.GlobalAveragePooling2D}


def _audio():
  tf.keras.utils.set_random_seed(0)
  return on_device._model_fn(*on_device.MODELS['audio'])()


def _smooth(model):
  """``model`` with ``_SMOOTH``'s layers swapped in, same weights."""

  def clone(layer):
    make = _SMOOTH.get(type(layer))
    return make() if make else layer.__class__.from_config(layer.get_config())

  smooth = tf.keras.models.clone_model(model, clone_function=clone)
  smooth.set_weights(model.get_weights())
  return smooth


def _keras_steps(model, weights, batches) -> list:
  """The weights before and after each SGD step of Keras."""
  for variable, value in zip(model.trainable_variables, weights):
    variable.assign(value)

  @tf.function
  def step(x, y):
    with tf.GradientTape() as tape:
      logits = model(x, training=True)
      loss = tf.reduce_mean(CrossEntropy().loss({'x': x, 'y': y}, Outputs(logits),
                                                None)) + tf.add_n(model.losses)
    for variable, grad in zip(model.trainable_variables,
                              tape.gradient(loss, model.trainable_variables)):
      variable.assign_sub(_LR * grad)

  trajectory = [list(weights)]
  for x, y in batches:
    step(x, y)
    trajectory.append([v.numpy() for v in model.trainable_variables])
  return trajectory


def _device_steps(client, weights, batches) -> list:
  client.restore(weights)
  trajectory = [list(weights)]
  for x, y in batches:
    client.train(x, y)
    trajectory.append(client.parameters())
  return trajectory


def _difference(before, after) -> list:
  return [a - b for a, b in zip(before, after)]


def _update(trajectory, step) -> list:
  """The update after ``step`` steps: initial - trained."""
  return _difference(trajectory[0], trajectory[step])


def _batches(x, y) -> list:
  return [(x[i:i + _BATCH], y[i:i + _BATCH].astype(np.int32))
          for i in range(0, len(y), _BATCH)]


def _device(model):
  module = training.build_training_module(model, None, tff.learning.optimizers.build_sgdm(_LR))
  return device_client.DeviceClient(training.convert_training_module(module))


def _block_of_layer(model) -> dict:
  """Each layer's block: 1-4 the conv blocks (each ends at a max pool), 5 the head."""
  block, blocks = 1, {}
  for layer in model.layers:
    blocks[layer.name] = block
    block += isinstance(layer, tf.keras.layers.MaxPooling2D)
  return blocks


def _blocks(model) -> list:
  """Each trainable variable's block (``_block_of_layer``)."""
  block_of = _block_of_layer(model)
  of_variable = {id(v): block_of[l.name] for l in model.layers for v in l.trainable_variables}
  return [of_variable[id(v)] for v in model.trainable_variables]


def _windows(a):
  """[windows, 4]: the 2x2 max-pool windows (valid padding) of [B, H, W, C]."""
  b, h, w, c = a.shape
  a = a[:, :h // 2 * 2, :w // 2 * 2]
  return a.reshape(b, h // 2, 2, w // 2, 2, c).transpose(0, 1, 3, 5, 2, 4).reshape(-1, 4)


def _forward(model, x) -> dict:
  """The float inference model in TFLite against Keras: the front end's (the first layer's)
  and the logits' gaps, and per block the ReLUs that see a pre-activation of the other
  sign and the max-pool windows with another winner."""
  relus = [l for l in model.layers if isinstance(l, tf.keras.layers.ReLU)]
  pools = [l for l in model.layers if isinstance(l, tf.keras.layers.MaxPooling2D)]
  probe = tf.keras.Model(model.inputs, [model.layers[1].output, model.output] +
                         [l.input for l in relus] + [l.input for l in pools])
  converter = tf.lite.TFLiteConverter.from_keras_model(probe)
  interpreter = tf.lite.Interpreter(model_content=converter.convert())
  runner = interpreter.get_signature_runner()
  (input_name,) = interpreter.get_signature_list()['serving_default']['inputs']
  lite = runner(**{input_name: x})
  lite = [lite[name] for name in probe.output_names]
  keras = [t.numpy() for t in probe(x, training=False)]
  counts = {block: {'relu_sign_flips': 0, 'relu_inputs': 0, 'pool_winner_flips': 0,
                    'pool_windows': 0} for block in range(1, len(pools) + 1)}
  block_of = _block_of_layer(model)
  for layer, want, got in zip(relus, keras[2:], lite[2:]):
    counts[block_of[layer.name]]['relu_sign_flips'] += int(np.sum((want > 0) != (got > 0)))
    counts[block_of[layer.name]]['relu_inputs'] += want.size
  for layer, want, got in zip(pools, keras[2 + len(relus):], lite[2 + len(relus):]):
    want, got = _windows(want), _windows(got)
    counts[block_of[layer.name]]['pool_winner_flips'] += int(np.sum(
        (want.max(1) > 0) & (want.argmax(1) != got.argmax(1))))
    counts[block_of[layer.name]]['pool_windows'] += len(want)
  return {'front_end': _gap([lite[0]], [keras[0]]), 'logits': _gap([lite[1]], [keras[1]]),
          'flips': counts}


def main():
  x, y = on_device._inputs((16000,), _EXAMPLES)
  batches = _batches(x, y)
  model = _audio()
  weights = [v.numpy() for v in model.trainable_variables]
  blocks = _blocks(model)
  forward = _forward(model, batches[0][0])
  client = _device(_audio())
  keras = _keras_steps(model, weights, batches)
  device = _device_steps(client, weights, batches)
  steps = range(1, len(batches) + 1)
  first_device, first_keras = _update(device, 1), _update(keras, 1)
  resynced = []
  for step, (bx, by) in enumerate(batches):
    client.restore(keras[step])
    client.train(bx, by)
    resynced.append(_gap(_difference(keras[step], client.parameters()),
                         _difference(keras[step], keras[step + 1])))
  noise = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
  perturbed = _keras_steps(_audio(), weights, _batches(x + 1e-7 * np.abs(x) * noise, y))
  smooth = _smooth(_audio())
  smooth_weights = [v.numpy() for v in smooth.trainable_variables]
  smooth_keras = _keras_steps(smooth, smooth_weights, batches)
  smooth_device = _device_steps(_device(_smooth(_audio())), smooth_weights, batches)
  results = {
      'setup': {'model': 'audio, dropout off', 'examples': _EXAMPLES, 'batch_size': _BATCH,
                'optimizer': f'sgd lr {_LR}', 'inputs': '0.1-std noise waveforms',
                'reference': 'Keras tf.function steps (client part loss + model losses)',
                'tensorflow': tf.__version__},
      'forward': {'front_end': forward['front_end'], 'logits': forward['logits']},
      'first_step': {
          'update': _gap(first_device, first_keras),
          'per_block': {b: _gap([d for d, k in zip(first_device, blocks) if k == b],
                                [w for w, k in zip(first_keras, blocks) if k == b])
                        for b in sorted(set(blocks))},
          'flips_first_batch': forward['flips']},
      'round': {'free_running': [_gap(_update(device, s), _update(keras, s)) for s in steps],
                'resynced_step': resynced,
                'keras_perturbed': [_gap(_update(perturbed, s), _update(keras, s))
                                    for s in steps]},
      'smooth_round': [_gap(_update(smooth_device, s), _update(smooth_keras, s))
                       for s in steps],
  }
  print(json.dumps(results, indent=2))
  _OUT.write_text(json.dumps(results, indent=2) + '\n')


if __name__ == '__main__':
  main()
