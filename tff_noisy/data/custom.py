"""Federated data the user brings: per-client arrays or a ``tff.simulation`` ClientData.

A config names it ``data.dataset: custom`` and the run takes the object from Python
(``tff_noisy.run(config, data=...)``). The clients are the user's own partition, so the
config's ``partition`` section is not used; its ``noise`` section, when set, flips the
clients' labels like any registered dataset's (seeded by ``seed``), and the labels before
the flip become the truth that methods' estimates are scored against. Without noise from
the config the truth is what the user passed as ``true_labels``, or unknown: estimates
are then recorded unscored. TensorFlow-free except ``from_client_data``.
"""

import hashlib
import json
import numbers
from typing import Mapping, Optional

import numpy as np

from tff_noisy.data import federated as federated_lib
from tff_noisy.data import noise as noise_lib

CUSTOM = federated_lib.CUSTOM
# The most classes: a model's output layer and every C x C noise matrix (0.8 GB of float64
# at 10,000) are built for them. Federated benchmarks have up to ~2,000 (TFF's GLDv2).
MAX_CLASSES = 10_000


def _arrays(value, what: str) -> np.ndarray:
  try:
    return np.asarray(value)
  except (TypeError, ValueError) as e:
    raise TypeError(f'{what}: expected an array, got {type(value).__name__} ({e})') from None


def inputs(value, what: str) -> np.ndarray:
  """``value`` as float32 inputs, refused when any is NaN or infinite (no client's
  training or evaluation could use them)."""
  array = _arrays(value, what)
  try:
    array = array.astype(np.float32)
  except (TypeError, ValueError) as e:
    raise TypeError(f'{what}: expected numeric inputs, got {array.dtype} ({e})') from None
  bad = array.size - int(np.count_nonzero(np.isfinite(array)))
  if bad:
    raise ValueError(f'{what}: {bad} values are NaN or infinite; inputs must be finite')
  return array


def labels(value, what: str, num_classes: Optional[int]) -> np.ndarray:
  """``value`` as int64 class labels, 1-D, in [0, ``num_classes``) (None: in [0,
  MAX_CLASSES))."""
  array = _arrays(value, what)
  if array.ndim != 1 or not (array.size == 0 or np.issubdtype(array.dtype, np.integer)):
    raise TypeError(f'{what}: expected a 1-D array of integer class labels, got '
                    f'{array.dtype} of shape {array.shape}')
  bound = f'num_classes={num_classes}' if num_classes is not None else f'{MAX_CLASSES:,}'
  if array.size and (array.min() < 0 or array.max() >= (num_classes or MAX_CLASSES)):
    raise ValueError(f'{what}: labels must be in [0, {bound}), got '
                     f'{array.min()}..{array.max()}')
  return array.astype(np.int64)


def check_num_classes(num_classes) -> None:
  """A ValueError naming ``num_classes`` unless it is an integer in [2, MAX_CLASSES]."""
  if (not isinstance(num_classes, numbers.Integral) or isinstance(num_classes, bool)
      or not 2 <= num_classes <= MAX_CLASSES):
    raise ValueError(f'num_classes: expected an integer in [2, {MAX_CLASSES:,}], got '
                     f'{num_classes!r}')


def from_arrays(clients: Mapping[str, tuple], *, test: Optional[tuple] = None,
                num_classes: Optional[int] = None, public_x=None, public_y=None,
                true_labels: Optional[Mapping[str, np.ndarray]] = None,
                class_names: Optional[list] = None,
                name: str = CUSTOM) -> federated_lib.FederatedData:
  """Federated data from ``{client id: (inputs [n, ...], labels [n])}``.

  Args:
    clients: each client's inputs and integer labels, keyed by client id (its order is
      the clients' order).
    test: ``(inputs, labels)`` the global model is evaluated on; None: no evaluation.
    num_classes: C, at most MAX_CLASSES; default: one more than the largest label seen.
    public_x: inputs on the server (FedDS's unlabelled public set).
    public_y: their clean labels, for a method that assumes a clean labelled server set
      (FOCUS); needs ``public_x``.
    true_labels: ``{client id: labels}`` when the clients' labels are known to be noisy
      and their truth is known (simulation): methods' estimates are scored against them.
    class_names: C names for reports; default ``'0'``..``'C-1'``.
    name: what results call the dataset.

  Raises:
    TypeError, ValueError: naming the argument (and client) that is wrong.
  """
  if not isinstance(clients, Mapping) or not clients:
    raise TypeError('clients: expected a non-empty mapping {client id: (inputs, labels)}, '
                    f'got {type(clients).__name__}')
  if num_classes is not None:
    check_num_classes(num_classes)
  x, y = {}, {}
  for cid, pair in clients.items():
    if not isinstance(cid, str) or not cid:
      raise TypeError(f'clients: client ids must be non-empty strings, got {cid!r}')
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
      raise TypeError(f"clients['{cid}']: expected a pair (inputs, labels), got "
                      f'{type(pair).__name__}')
    x[cid] = inputs(pair[0], f"clients['{cid}'] inputs")
    y[cid] = labels(pair[1], f"clients['{cid}'] labels", num_classes)
    if len(x[cid]) != len(y[cid]):
      raise ValueError(f"clients['{cid}']: {len(x[cid])} inputs but {len(y[cid])} labels")
  shapes = {cid: a.shape[1:] for cid, a in x.items()}
  input_shape = next(iter(shapes.values()))
  for cid, shape in shapes.items():
    if shape != input_shape:
      raise ValueError(f"clients['{cid}'] inputs: shape {shape} per example, but client "
                       f"'{next(iter(shapes))}' has {input_shape}")
  if not input_shape:
    raise ValueError('clients: inputs need a batch axis and at least one feature axis')
  seen = max((int(labels.max()) for labels in y.values() if labels.size), default=0) + 1
  num_classes = int(num_classes or max(seen, 2))
  if test is None:
    x_test = np.zeros((0, *input_shape), np.float32)
    y_test = np.zeros(0, np.int64)
  else:
    if not isinstance(test, (tuple, list)) or len(test) != 2:
      raise TypeError(f'test: expected a pair (inputs, labels), got {type(test).__name__}')
    x_test = inputs(test[0], 'test inputs')
    y_test = labels(test[1], 'test labels', num_classes)
    if x_test.shape[1:] != input_shape or len(x_test) != len(y_test):
      raise ValueError(f'test: expected inputs [n, {", ".join(map(str, input_shape))}] and '
                       f'n labels, got {x_test.shape} and {len(y_test)}')
  if public_x is not None:
    public_x = inputs(public_x, 'public_x')
    if public_x.shape[1:] != input_shape:
      raise ValueError(f'public_x: expected inputs of shape {input_shape} per example, '
                       f'got {public_x.shape[1:]}')
  if public_y is not None:
    if public_x is None:
      raise ValueError('public_y: labels of the public set need its inputs, public_x')
    public_y = labels(public_y, 'public_y', num_classes)
    if len(public_y) != len(public_x):
      raise ValueError(f'public_y: {len(public_y)} labels for {len(public_x)} public_x '
                       'inputs')
  y_true = None
  if true_labels is not None:
    if not isinstance(true_labels, Mapping) or set(true_labels) != set(x):
      raise ValueError('true_labels: expected a mapping with the same client ids as clients')
    y_true = {cid: labels(true_labels[cid], f"true_labels['{cid}']", num_classes)
              for cid in x}
    for cid in x:
      if len(y_true[cid]) != len(y[cid]):
        raise ValueError(f"true_labels['{cid}']: {len(y_true[cid])} labels, but the client "
                         f'has {len(y[cid])}')
  if class_names is not None and len(class_names) != num_classes:
    raise ValueError(f'class_names: expected {num_classes} names, got {len(class_names)}')
  data = federated_lib.FederatedData(
      dataset_name=str(name), num_classes=num_classes, input_shape=tuple(input_shape),
      class_names=list(class_names or map(str, range(num_classes))), config_hash='',
      client_ids=list(x), x=x, y=y, y_true=y_true, noise_rates=None,
      transition_matrices=None, x_test=x_test, y_test=y_test, x_public=public_x,
      y_public=public_y)
  if y_true is not None:
    data = _with_truth(data, y_true)
  data.config_hash = _digest(data)
  return data


def from_client_data(client_data, *, x_key: str = 'x', y_key: str = 'y',
                     test: Optional[tuple] = None, num_classes: Optional[int] = None,
                     **options) -> federated_lib.FederatedData:
  """Federated data from a ``tff.simulation.datasets.ClientData`` whose examples are
  mappings with inputs under ``x_key`` and integer labels under ``y_key`` (TFF's EMNIST:
  ``x_key='pixels', y_key='label'``); the other arguments are ``from_arrays``'s."""
  for attribute in ('client_ids', 'create_tf_dataset_for_client'):
    if not hasattr(client_data, attribute):
      raise TypeError('client_data: expected a tff.simulation.datasets.ClientData, got '
                      f'{type(client_data).__name__}')
  clients = {}
  for cid in client_data.client_ids:
    xs, ys = [], []
    for example in client_data.create_tf_dataset_for_client(cid).as_numpy_iterator():
      if not isinstance(example, Mapping) or x_key not in example or y_key not in example:
        found = list(example) if isinstance(example, Mapping) else type(example).__name__
        raise ValueError(f"client_data: client '{cid}' examples need keys x_key={x_key!r} "
                         f'and y_key={y_key!r}; found {found}')
      xs.append(example[x_key])
      ys.append(example[y_key])
    clients[str(cid)] = (np.stack(xs) if xs else np.zeros((0,)), np.array(ys, np.int64))
  return from_arrays(clients, test=test, num_classes=num_classes, **options)


def with_noise(data: federated_lib.FederatedData, noise_config, seed: int
               ) -> federated_lib.FederatedData:
  """``data`` with the config's label noise applied to its clients' labels; the labels
  before the flip (or ``data.y_true`` where known) are the truth."""
  if noise_config.name == 'none':
    return data
  noisy = noise_lib.apply_noise([data.y[cid] for cid in data.client_ids],
                                data.num_classes, noise_config, seed)
  truth = data.y_true if data.y_true is not None else data.y
  flipped = federated_lib.FederatedData(**{
      **vars(data), 'y': dict(zip(data.client_ids, noisy))})
  flipped = _with_truth(flipped, dict(truth))
  flipped.config_hash = _digest(flipped, {'seed': seed, 'noise': vars(noise_config)})
  return flipped


def _with_truth(data, y_true: dict) -> federated_lib.FederatedData:
  """``data`` with ``y_true`` and the noise rates and transition matrices it implies."""
  ids = data.client_ids
  return federated_lib.FederatedData(**{
      **vars(data), 'y_true': y_true,
      'noise_rates': np.array([np.mean(data.y[c] != y_true[c]) if len(y_true[c]) else 0.0
                               for c in ids]),
      'transition_matrices': np.stack([noise_lib.transition_matrix(
          y_true[c], data.y[c], data.num_classes) for c in ids])})


def _digest(data, extra: Optional[dict] = None) -> str:
  """The first 16 hex digits of the SHA-256 of the data's arrays (its ``data_hash``)."""
  digest = hashlib.sha256(json.dumps(
      [data.dataset_name, data.num_classes, list(data.client_ids), extra],
      sort_keys=True, default=str).encode())
  arrays = [data.x_test, data.y_test]
  for cid in data.client_ids:
    arrays += [data.x[cid], data.y[cid]]
    if data.y_true is not None:
      arrays.append(data.y_true[cid])
  if data.x_public is not None:
    arrays.append(data.x_public)
  if data.y_public is not None:
    arrays.append(data.y_public)
  for array in arrays:
    digest.update(str((array.dtype.str, array.shape)).encode())
    digest.update(np.ascontiguousarray(array).reshape(-1).view(np.uint8))
  return digest.hexdigest()[:16]
