"""Noisy-client detection's records, shared by the methods that flag noisy clients
(MaskedOptim, FedELC, FedNoRo, FedCorr): ``NoisyClients`` scores the flags against the
clients whose labels are noisy, ``LabelEstimates`` the labels a method estimates on the
flagged clients against the true ones, ``DaAggWeights`` the share of a round's DaAgg
weight on truly noisy clients (FedNoRo, FedELC), and ``DetectionSection`` is their
section of ``tff-noisy report``. ``ClientScores`` and ``ClientScoreSection`` are the
record and report section of a per-client reliability a server estimates for its
weights (FedDS's Dawid-Skene reliabilities, FOCUS's credibilities)."""

from typing import Dict

import numpy as np

from tff_noisy import diagnostics
from tff_noisy import reporting
from tff_noisy.ops import detection
from tff_noisy.ops import label_distribution


class NoisyClients(diagnostics.Diagnostic):
  """``{client id: flagged}``: ``noisy_clients`` (the flagged ids) and their precision
  and recall against the clients whose labels are noisy (``detection_truth``)."""

  def __init__(self, flags: Dict[str, bool]):
    self.flags = flags

  def unscored(self):
    if not self.flags:
      return {}
    return {'noisy_clients': [cid for cid, flagged in self.flags.items() if flagged]}

  def scored(self, truth):
    if not self.flags:
      return {}
    return {**self.unscored(),
            'detection_truth': detection.detection_report(
                list(self.flags.values()), [truth.noise_rates[cid] for cid in self.flags])}


class LabelEstimates(diagnostics.Diagnostic):
  """``{client id: estimated labels [n]}`` of the flagged clients, against the observed
  and the true labels (``label_estimate_accuracy``)."""

  def __init__(self, estimates: Dict[str, np.ndarray]):
    self.estimates = estimates

  def scored(self, truth):
    if not self.estimates:
      return {}
    return {'label_estimate_accuracy': label_distribution.estimate_accuracy_report(
        self.estimates, truth.observed_labels, truth.true_labels)}


class DaAggWeights(diagnostics.Diagnostic):
  """``{client id: DaAgg weight}`` of a round (``daagg_weights``) and, against the truth,
  the weight on clients whose labels are noisy (``daagg_weight_on_noisy``) beside their
  share of the round's examples (``daagg_examples_on_noisy``)."""

  def __init__(self, weights: Dict[str, float], sizes: Dict[str, float]):
    self.weights = weights
    self.sizes = sizes

  def unscored(self):
    return {'daagg_weights': self.weights}

  def scored(self, truth):
    noisy = [cid for cid in self.weights if truth.noise_rates[cid] > 0]
    total = sum(self.sizes.values())
    return {**self.unscored(),
            'daagg_weight_on_noisy': float(sum(self.weights[c] for c in noisy)),
            'daagg_examples_on_noisy': (float(sum(self.sizes[c] for c in noisy) / total)
                                        if total else None)}


_ROUND_KEYS = (('detection_truth', 'noisy-client detection vs the truth'),
               ('label_estimate_accuracy', 'estimated labels vs the true labels'))


class DetectionSection(reporting.Section):
  round_keys = ('noisy_clients', 'detection_truth', 'label_estimate_accuracy')

  def estimates(self, results):
    flagged = [r for r in results.get('rounds', []) if 'noisy_clients' in r]
    if not flagged or not results.get('client_noise_rates'):
      return []
    last = flagged[-1]  # Detection probes every client.
    return [reporting.Estimate(
        'noisy_clients', 'flagged as noisy (1) or not (0)', f'round {last["round"]}',
        {cid: float(cid in (last['noisy_clients'] or []))
         for cid in sorted(results['client_noise_rates'])})]

  def summary(self, results):
    lines = []
    records = results.get('rounds', [])
    detection = [r['detection_truth'] for r in records if r.get('detection_truth')]
    if detection:
      last = detection[-1]
      lines.append(f'noisy-client detection: {last.get("flagged")} flagged, '
                   f'{last.get("truly_noisy")} truly noisy; precision '
                   f'{reporting.num(last.get("precision"))}, recall '
                   f'{reporting.num(last.get("recall"))}')
    labels = [r['label_estimate_accuracy'] for r in records
              if r.get('label_estimate_accuracy')]
    if labels and labels[-1].get('accuracy') is not None:
      last = labels[-1]
      lines.append(f'labels on flagged clients: {last["observed_accuracy"]:.1%} right as '
                   f'observed, {last["accuracy"]:.1%} as estimated')
    return lines

  def render(self, w, groups):
    rows = []
    has_setting = any(s is not None for s in groups)
    for setting, methods in groups.items():
      for method, runs in methods.items():
        for run in runs:
          records = run.results.get('rounds', [])
          for key, what in _ROUND_KEYS:
            last = [r for r in records if r.get(key)]
            if last:
              rows.append(([setting] if has_setting else []) + [
                  method, reporting.seed_label(run), f'{what} (round {last[-1]["round"]})',
                  reporting.scalars(last[-1][key])])
    if rows:
      w.add('## Noisy-client detection and label estimates', '')
      w.table((['setting'] if has_setting else []) + ['method', 'run', 'what', 'values'],
              rows)


SECTIONS = (DetectionSection(),)


class ClientScores(diagnostics.Diagnostic):
  """``{client id: score}`` under ``key``, a higher score for a more reliable client, and
  under ``correlation_key`` their Pearson r with 1 - the true noise rate (absent for
  fewer than two clients): a reliable client has a low noise rate."""

  def __init__(self, key: str, correlation_key: str, scores: Dict[str, float]):
    self.key = key
    self.correlation_key = correlation_key
    self.scores = scores

  def unscored(self):
    return {self.key: self.scores}

  def scored(self, truth):
    entries = self.unscored()
    r = diagnostics.correlation(
        self.scores, {cid: 1.0 - rate for cid, rate in truth.noise_rates.items()})
    if r is not None:
      entries[self.correlation_key] = r
    return entries


class ClientScoreSection(reporting.Section):
  """The report's scatter of a ``ClientScores`` record (``key``, ``correlation_key``;
  ``what`` names the score) and of the weights it gave (``weights_key``), per client,
  against the true noise rates."""

  def __init__(self, key: str, correlation_key: str, weights_key: str, what: str):
    self.key = key
    self.correlation_key = correlation_key
    self.weights_key = weights_key
    self.what = what
    self.round_keys = (key, correlation_key, weights_key)

  def estimates(self, results):
    records = results.get('rounds', [])
    found = []
    with_scores = [r for r in records if r.get(self.key)]
    if with_scores:
      recorded = [r[self.correlation_key] for r in with_scores
                  if r.get(self.correlation_key) is not None]
      found.append(reporting.Estimate(
          self.key, self.what, f'mean over the {len(with_scores)} rounds that estimated it',
          reporting.client_values(with_scores, self.key),
          ("the run's own r with 1 - noise rate (mean over rounds)",
           float(np.mean(recorded))) if recorded else None))
    return found + reporting.weights_estimate(
        [r[self.weights_key] for r in records if r.get(self.weights_key)])
