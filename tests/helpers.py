"""What many tests share: a toy linear model and random clients for the process and method
tests, and a run stepped through ``driver.Simulation`` with restarts (crash and resume
without faking a crash). Tests import it as ``helpers`` (``tests/`` is on the path through
its conftest)."""
import collections
from typing import Collection

import numpy as np
import tensorflow as tf

from tff_noisy import config as config_lib
from tff_noisy.federated import client_data as client_data_lib
from tff_noisy.simulation import driver


def linear_model(features: int = 4, classes: int = 3) -> tf.keras.Model:
  """One dense layer named ``logits`` on ``features`` inputs."""
  return tf.keras.Sequential([tf.keras.layers.Input((features,)),
                              tf.keras.layers.Dense(classes, name='logits')])


def random_client(seed: int, n: int, features: int = 4, classes: int = 3) -> tuple:
  """``n`` standard-normal float32 inputs and uniform labels in ``[0, classes)``."""
  rng = np.random.default_rng(seed)
  return rng.normal(size=(n, features)).astype(np.float32), rng.integers(0, classes, n)


def client_data(x: np.ndarray, y: np.ndarray, batch_size: int = 0,
                **features) -> client_data_lib.ClientData:
  """A client's ``ClientData`` as the simulation builds one (``x``, int64 ``y`` and
  ``index``, plus ``features``), its examples kept in order, in batches of ``batch_size``
  (0: one batch): what ``FederatedProcess`` takes."""
  return client_data_lib.make_client_data(x, y, batch_size or max(len(y), 1), None, features)


def client_dataset(x: np.ndarray, y: np.ndarray, batch_size: int = 0,
                   **features) -> tf.data.Dataset:
  """:func:`client_data`'s ``tf.data`` dataset (what a client's training iterates)."""
  return client_data(x, y, batch_size, **features).dataset()


def small_digits_config(method: str, runtime: str = 'tf', params: dict = None,
                        public_fraction: float = 0.0, **fl) -> config_lib.ExperimentConfig:
  """A two-round digits run for a method's end-to-end tests: 4 IID clients, half of them
  with symmetric noise at 0.4, a 16-wide MLP; ``fl`` overrides the ``fl`` section."""
  return config_lib.from_dict({
      'seed': 1, 'data': {'dataset': 'digits', 'public_fraction': public_fraction},
      'partition': {'name': 'iid', 'num_clients': 4},
      'noise': {'name': 'symmetric', 'rate': 0.4, 'noisy_fraction': 0.5},
      'model': {'name': 'mlp', 'width': 16},
      'method': {'name': method, 'params': params or {}},
      'fl': {'rounds': 2, 'participation': 0.5, 'local_epochs': 1, 'batch_size': 32,
             'client_lr': 0.1, 'client_runtime': runtime, **fl}})


def run_rounds(config) -> driver.Simulation:
  """``config`` run to its last round in one ``Simulation``, returned."""
  simulation = driver.Simulation(config)
  simulation.prepare()
  while not simulation.done:
    simulation.run_round()
  return simulation


def max_difference(a, b) -> float:
  """The largest absolute difference between two equally shaped lists of arrays."""
  return max(float(np.abs(np.asarray(x) - np.asarray(y)).max()) for x, y in zip(a, b))


def run_with_restarts(config, checkpoint_dir: str,
                      restart_after: Collection[int] = ()) -> driver.Simulation:
  """Runs ``config`` to its last round; after each round in ``restart_after`` saves a
  checkpoint in ``checkpoint_dir`` and goes on in a new ``Simulation`` resumed from it.

  Returns the last ``Simulation``: its ``history``, ``store`` and ``final_weights()`` are
  the run's.
  """
  simulation = driver.Simulation(config)
  simulation.prepare()
  while not simulation.done:
    round_num = simulation.run_round()['round']
    if round_num in restart_after:
      simulation.save_checkpoint(checkpoint_dir)
      simulation = driver.Simulation(config)
      assert simulation.resume_from(checkpoint_dir)
      assert simulation.next_round == round_num + 1
      simulation.prepare()
  return simulation


def fake_tfds_cifar10(data_dir: str, train: int, test: int, seed: int = 0) -> str:
  """A prepared TFDS ``cifar10`` directory (random images and labels, the registered
  builder's version and features) under ``data_dir``, readable by ``tfds.builder`` as
  the real one; returns ``data_dir``."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  info = tfds.builder('cifar10').info
  rng = np.random.default_rng(seed)

  def split(n):
    return tf.data.Dataset.from_tensor_slices({
        'id': [f'fake_{i}'.encode() for i in range(n)],
        'image': rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8),
        'label': rng.integers(0, 10, n)})

  tfds.dataset_builders.store_as_tfds_dataset(
      name='cifar10', version=str(info.version), features=info.features,
      split_datasets={'train': split(train), 'test': split(test)}, data_dir=data_dir)
  return data_dir
