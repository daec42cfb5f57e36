"""FedLN-AKD's section of ``tff-noisy report``: the noise estimates n̂ it made once
before round 1 (``extra.noise_estimates``) against the clients' true noise rates, and the
distilling clients scored as noisy-client flags (``extra.detection_truth``)."""

from tff_noisy import reporting


def _extra(results) -> dict:
  return results.get('extra') or {}


class NoiseEstimateSection(reporting.Section):
  extra_keys = ('noise_estimates', 'true_noise_rates', 'noisy_clients', 'detection_truth')

  def estimates(self, results):
    estimates = _extra(results).get('noise_estimates') or {}
    if not estimates:
      return []
    return [reporting.Estimate(
        'noise_estimates', 'noise estimate n̂ (k-NN vote)', 'before round 1',
        {cid: float(v) for cid, v in estimates.items() if v is not None}, diagonal=True)]

  def summary(self, results):
    truth = _extra(results).get('detection_truth') or {}
    if not truth:
      return []
    return [f'distilling clients (n̂ > 0) as noisy-client flags: {truth.get("flagged")} '
            f'flagged, {truth.get("truly_noisy")} truly noisy; precision '
            f'{reporting.num(truth.get("precision"))}, recall '
            f'{reporting.num(truth.get("recall"))}']

  def render(self, w, groups):
    rows = []
    has_setting = any(s is not None for s in groups)
    for setting, method, runs in self.found(groups, lambda r: _extra(r).get('detection_truth')):
      for run in runs:
        truth = _extra(run.results).get('detection_truth')
        if truth:
          rows.append(([setting] if has_setting else []) + [
              method, reporting.seed_label(run), reporting.scalars(truth)])
    if rows:
      w.add("## FedLN-AKD's distilling clients against the truth", '',
            'A client distils when its k-NN noise estimate n̂ (before round 1) is above 0 '
            '(`noise_threshold`); scored as a noisy-client flag against the clients whose '
            'labels are noisy (precision, recall; a client whose true rate is at least '
            '`high_rate` counts as highly noisy in the `_high_noise` scores).', '')
      w.table((['setting'] if has_setting else []) + ['method', 'run', 'values'], rows)


SECTIONS = (NoiseEstimateSection(),)
