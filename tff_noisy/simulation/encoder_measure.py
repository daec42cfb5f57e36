"""How good an encoder's neighbourhoods are for the methods that use them, on a config's
own clients: ``tff-noisy embed measure`` (docs/papers/lsc.md and fedln.md, "Encoder
control").

For one encoder and one build of a config's federated data (its noisy clients), with
the embeddings the methods compute (``encoders.embed_training_inputs``, cached):

- ``knn_accuracy``: leave-one-out 10-NN accuracy against the true labels, all clients'
  examples pooled (``ops.knn.knn_accuracy``);
- ``nnc``: FedLN's NNC vote on each client's noisy labels (``ops.knn.knn_vote``, k and
  tie seeds as ``methods.fedln`` uses them) scored as the FedLN runs score it
  (``LabelCorrection``): the share of wrong labels before and after, the share of wrong
  labels fixed and of clean labels broken (``corrupted``);
- ``lsc``: LSC's in-batch neighbour purity (``NeighbourPurity``): the share of the K
  in-batch neighbours with the example's true label, next to the same-label chance.

k of the vote and K and the batch of the purity are the config's where its method is
FedLN's or LSC's, else those methods' defaults (k = 100; K = 4, batches of
``fl.batch_size``). The truth is the simulation's; this is a measurement, no method.
"""

import dataclasses
import time

import numpy as np

from tff_noisy import diagnostics
from tff_noisy.embeddings import encoders
from tff_noisy.embeddings.params import EncoderParams
from tff_noisy.methods import fedln as fedln_params
from tff_noisy.methods import lsc as lsc_params
from tff_noisy.methods.fedln.diagnostics import LabelCorrection
from tff_noisy.methods.lsc.diagnostics import NeighbourPurity
from tff_noisy.ops import knn

KNN_K = 10
_ENCODER_FIELDS = {f.name for f in dataclasses.fields(EncoderParams)}


def settings(config) -> dict:
  """k of NNC's vote, K and batch of LSC's purity for ``config`` (see the module)."""
  params = config.method.params
  nnc_k = fedln_params.NNCParams.k
  lsc_k = lsc_params.LSCParams.k
  if config.method.name.startswith('fedln'):
    nnc_k = params.get('k', nnc_k)
  if config.method.name == 'lsc':
    lsc_k = params.get('k', lsc_k)
  return {'nnc_k': int(nnc_k), 'lsc_k': int(lsc_k), 'lsc_batch_size': config.fl.batch_size}


def encoder_params(config, encoder: str) -> EncoderParams:
  """The config's encoder parameters (PCA's width, ...) with ``encoder`` named."""
  given = {k: v for k, v in config.method.params.items() if k in _ENCODER_FIELDS}
  return EncoderParams(**{**given, 'encoder': encoder})


def measure(config, data, encoder: str) -> dict:
  """The measurements of ``encoder`` on ``data`` (the build of ``config``)."""
  params = encoder_params(config, encoder)
  params.check(config.fl.rounds)
  chosen = settings(config)
  start = time.monotonic()
  built, embeddings = encoders.embed_training_inputs(params, data, config.seed)
  seconds = time.monotonic() - start
  truth = diagnostics.Truth.of(data)
  per_client, corrected, offset = {}, {}, 0
  for index, cid in enumerate(data.client_ids):
    n = len(data.y[cid])
    per_client[cid] = embeddings[offset:offset + n]
    if n:  # As methods.fedln's NNC votes.
      corrected[cid] = knn.knn_vote(per_client[cid], data.y[cid], chosen['nnc_k'],
                                    seed=config.seed * 100003 + index,
                                    num_classes=data.num_classes)
    offset += n
  nnc = LabelCorrection(corrected).scored(truth)['label_correction']['overall']
  lsc = NeighbourPurity(per_client, chosen['lsc_k'], chosen['lsc_batch_size'], config.seed,
                        built.encoder_id).scored(truth)['lsc']
  true_labels = np.concatenate([data.y_true[cid] for cid in data.client_ids])
  return {
      'encoder': encoder, 'encoder_id': built.encoder_id, 'seed': config.seed,
      'embedding_width': int(embeddings.shape[1]), 'embed_seconds': round(seconds, 1),
      'knn_accuracy': knn.knn_accuracy(embeddings, true_labels, k=KNN_K, seed=config.seed),
      'nnc': {key: nnc[key] for key in ('noise_before', 'noise_after', 'fixed', 'corrupted')},
      'lsc': {key: lsc[key] for key in ('neighbour_purity', 'same_label_chance')},
      **chosen,
  }


_COLUMNS = (('10-NN acc.', lambda r: r['knn_accuracy']),
            ('NNC wrong before', lambda r: r['nnc']['noise_before']),
            ('NNC wrong after', lambda r: r['nnc']['noise_after']),
            ('NNC clean broken', lambda r: r['nnc']['corrupted']),
            ('LSC purity', lambda r: r['lsc']['neighbour_purity']),
            ('chance', lambda r: r['lsc']['same_label_chance']))


def table(rows: list) -> str:
  """A Markdown table of ``measure`` rows: per encoder, each column's mean over seeds
  (± std over seeds where there are several), as percentages."""
  names = list(dict.fromkeys(r['encoder'] for r in rows))
  lines = ['| encoder | seeds | ' + ' | '.join(c for c, _ in _COLUMNS) + ' |',
           '|---|---|' + '---:|' * len(_COLUMNS)]
  for name in names:
    own = [r for r in rows if r['encoder'] == name]
    cells = []
    for _, get in _COLUMNS:
      values = 100 * np.array([get(r) for r in own], float)
      cells.append(f'{values.mean():.1f}' + (f' ± {values.std(ddof=1):.1f}'
                                             if len(values) > 1 else ''))
    lines.append(f'| {name} | {len(own)} | ' + ' | '.join(cells) + ' |')
  return '\n'.join(lines)
