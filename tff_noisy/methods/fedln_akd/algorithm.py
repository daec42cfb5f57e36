"""FedLN-AKD: adaptive knowledge distillation (Tsouvalas et al. 2023, as the released
code FederatedML/FedLN at 1ff2ff7 implements it: ``src/fedln/fedln__akd.py``,
``src/utils/distiller.py``, ``src/utils/knn_relabel.py``).

1. Before round 1 (the code's ``--distil_round 1``), each client's noise estimate n̂:
   the share of its observed labels the k-NN vote on the frozen encoder's embeddings of
   its own examples changes, 0 below ``noise_threshold`` (``akd.knn_noise_estimate``;
   the code's ``estimate_noise_with_pretrained_knn``). "Adaptive": a client distils iff
   n̂ > 0 (``akd.distils``); n̂'s value is used no further and α is fixed.
2. Every client trains its client model (``model.akd_model``: a linear representation
   head h on the pooled features beside the classifier) on CE(z, ŷ) + α·distil·(1/D)
   Σ_d |g_d(x) − h_d(φ(x))| (``parts.EmbeddingDistillation``); g(x), the encoder's
   embedding, reaches the client as the per-example field ``embedding``
   (``methods.client_embeddings``, un-normalised as the code reads its features file).
3. The server runs the configured aggregator as for FedAvg (the code's FedAvg).

Deviation: the code keeps h on each client (appended to the received weights, never
sent); here h is part of the shared model, trained by the clients that distil and
averaged with the rest (a non-distilling client leaves it as received). h never enters
the logits, so evaluation sees the configured model's classifier alone.

``results.extra`` has ``noise_estimates`` (n̂ per client) and the distilling clients
scored as noisy-client flags (``NoisyClients``) against the truth: reporting only.
"""

import numpy as np

from tff_noisy.methods import client_embeddings
from tff_noisy.methods import contract
from tff_noisy.methods.fedln_akd import model as akd_model
from tff_noisy.methods.fedln_akd import parts as akd_parts
from tff_noisy.ops import akd

EMBEDDING, DISTIL = akd_parts.EMBEDDING_KEY, akd_parts.DISTIL_KEY


class NoiseEstimates(contract.Diagnostic):
  """``{client id: n̂}`` (``extra.noise_estimates``) beside the clients' true noise rates
  (``extra.true_noise_rates``, the share of observed labels that are not the true ones)."""

  def __init__(self, estimates):
    self.estimates = estimates

  def unscored(self):
    return {'noise_estimates': self.estimates}

  def scored(self, truth):
    rates = {cid: float(np.mean(np.asarray(truth.observed_labels[cid])
                                != np.asarray(truth.true_labels[cid])))
             if len(truth.true_labels[cid]) else 0.0 for cid in self.estimates}
    return dict(self.unscored(), true_noise_rates=rates)


class EmbeddingsAndEstimates(client_embeddings.ClientEmbeddings):
  """The clients' encoder embeddings and their distillation flags, once before round 1."""

  def __init__(self, params):
    super().__init__(params, EMBEDDING, normalize=False, method='fedln_akd')

  def fields(self, data) -> dict:
    return dict(super().fields(data), **{DISTIL: (np.float32, ())})

  def prepare(self, server) -> dict:
    _, own = self.embed(server)
    data, seed = server.data, server.setup.seed
    estimates, flags = {}, {}
    for index, cid in enumerate(data.client_ids):
      labels = data.y[cid]
      estimates[cid] = (akd.knn_noise_estimate(
          own[cid], labels, self.params.neighbors, self.params.noise_threshold,
          seed=seed * 100003 + index, num_classes=data.num_classes) if len(labels) else 0.0)
      flags[cid] = akd.distils(estimates[cid])
      server.store.set_derived(cid, DISTIL, np.float32(flags[cid]))
    return {'fedln_akd_estimates': NoiseEstimates(estimates),
            'fedln_akd_distilling': contract.NoisyClients(flags)}

  def extras(self, client_id, num_examples, store) -> dict:
    flag = store.get(client_id, DISTIL)
    if flag is None:
      raise ValueError(f"client {client_id}: no '{DISTIL}' flag; fedln_akd's prepare "
                       'computes it for every client before round 1')
    return dict(super().extras(client_id, num_examples, store),
                **{DISTIL: np.full(num_examples, flag, np.float32)})


def fedln_akd(params, setup) -> contract.Recipe:
  """CE + α·MAE(h(φ(x)), g(x)) on the clients estimated noisy, FedAvg on the server."""
  del setup
  steps = EmbeddingsAndEstimates(params)
  width = {}  # The encoder's, known from the data when the data plan's fields are.

  def fields(data):
    specs = steps.fields(data)
    width['D'] = int(specs[EMBEDDING][1][0])
    return specs

  def client_model(model_fn):
    def build():
      if 'D' not in width:
        raise ValueError("fedln_akd's client model needs the encoder's width: build the "
                         "data plan's fields first")
      return akd_model.akd_model(model_fn, width['D'])()
    return build

  return contract.Recipe(
      parts=(contract.CrossEntropy(), akd_parts.EmbeddingDistillation(params.alpha)),
      client_model=client_model, data=contract.DataPlan(fields=fields, extras=steps.extras),
      server=(steps,))
