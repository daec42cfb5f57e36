"""FedLN's sections of ``tff-noisy report``: NNC's label correction and NA-FedAvg's noise
estimates against the truth."""

import functools

from tff_noisy import reporting
from tff_noisy.methods.common import display_name

_CORRECTION_FIELDS = ('fraction_changed', 'precision', 'noise_before', 'noise_after',
                      'fixed', 'corrupted')


def _correction(results) -> dict:
  return (results.get('extra') or {}).get('label_correction') or {}


class LabelCorrectionSection(reporting.Section):
  extra_keys = ('label_correction',)

  def summary(self, results):
    overall = _correction(results).get('overall')
    if overall and overall.get('noise_before') is not None:
      return [f'label correction: wrong labels {overall["noise_before"]:.1%} -> '
              f'{overall["noise_after"]:.1%}']
    return []

  def render(self, w, groups):
    found = [(s, m, [r for r in runs if _correction(r.results)])
             for s, m, runs in self.found(groups, _correction)]
    if not found:
      return
    w.add('## Label correction', '')
    w.add('Labels the method changed before training, against the true labels: changed '
          '(share of labels changed), precision (share of the changes that made a label '
          'right), noise before / after (share of wrong labels), fixed (share of wrong '
          'labels made right), corrupted (share of right labels made wrong).', '')
    rows, figures = [], []
    has_setting = any(s is not None for s, _, _ in found)
    for setting, method, runs in found:
      points = {}
      for run in runs:
        report = _correction(run.results)
        overall = report.get('overall') or {}
        rows.append(([setting] if has_setting else []) + [
            method, reporting.seed_label(run), reporting.num(overall.get('num_examples'))] +
                    [reporting.num(overall.get(k)) for k in _CORRECTION_FIELDS])
        per_client = report.get('per_client') or {}
        pairs = [(c['noise_before'], c['noise_after']) for c in per_client.values()
                 if c and c.get('noise_before') is not None and c.get('noise_after') is not None]
        if pairs:
          points[reporting.seed_label(run)] = ([p[0] for p in pairs], [p[1] for p in pairs])
      if points:
        figures.append((
            f'{method}{f" ({setting})" if setting else ""}: per-client share of wrong '
            'labels before and after the correction; points below the dashed line are '
            'clients it cleaned.',
            functools.partial(reporting.plot_scatter, points, 'noise before correction',
                              'noise after correction',
                              f'{display_name(method)}: label correction per '
                              'client', diagonal=True),
            reporting.slug('report', setting, method, 'label-correction') + '.png',
            f'{method} label correction per client'))
    w.table((['setting'] if has_setting else []) + [
        'method', 'run', 'examples', 'changed', 'precision', 'noise before', 'noise after',
        'fixed', 'corrupted'], rows)
    w.figures_after(figures)


class NoiseEstimatesSection(reporting.Section):
  round_keys = ('noise_estimates', 'noise_estimate_correlation')

  def estimates(self, results):
    with_estimates = [r for r in results.get('rounds', []) if r.get('noise_estimates')]
    if not with_estimates:
      return []
    last = with_estimates[-1]
    recorded = last.get('noise_estimate_correlation')
    return [reporting.Estimate(
        'noise_estimates', 'noise estimate', f'round {last["round"]}',
        {cid: float(v) for cid, v in last['noise_estimates'].items() if v is not None},
        None if recorded is None else ('correlation recorded by the run', recorded),
        diagonal=True)]


SECTIONS = (LabelCorrectionSection(), NoiseEstimatesSection())
