"""A reproduced table beside the paper's (``tff-noisy reproduce``, then ``report``): each
cell in the paper's metric with its spread over seeds, the gaps to the baseline ours vs
the paper's, the ranking, and whether the baseline is in the papers' regime.
TensorFlow-free."""

from typing import Optional

import numpy as np

from tff_noisy import reporting

METRICS = {'best': 'best evaluated round', 'last10': 'mean of the last 10 evaluated rounds',
           'final': 'last round'}
# The papers' regime: FedAvg memorises, its accuracy falling at least this far (points)
# from its best round to its last.
REGIME_FALL = 10.0


def in_regime(fall: float) -> bool:
  """Whether a fall of ``fall`` points from the best round is the papers' regime."""
  return round(fall, 6) >= REGIME_FALL


def paper_metric(results: dict, metric: str) -> Optional[float]:
  """Our run's test accuracy in the paper's metric (``METRICS``)."""
  if metric == 'best':
    values = [r['test_accuracy'] for r in results.get('rounds', [])
              if r.get('test_accuracy') is not None]
    return max(values) if values else None
  return results.get('final_accuracy' if metric == 'final' else 'last10_accuracy')


def render(w: reporting.Writer, groups: dict, paper: dict) -> None:
  """The table beside the paper's: each cell in the paper's metric (mean ± std over
  seeds), last-10 and best always, the gap to FedAvg ours vs the paper's, and whether
  the methods rank as in the paper."""
  reading = paper.get('metric_reading')
  metric = paper['metric'] if paper['metric'] in METRICS else reading or 'last10'
  window = reporting.window_label([r for methods in groups.values()
                                   for runs in methods.values() for r in runs])
  what = {**METRICS, 'last10': METRICS['last10'].replace('last 10', window)}
  if metric == paper['metric']:
    ours = f'ours in the same metric ({what[metric]})'
  elif reading:  # The paper does not say which round; the protocol reads it as one.
    ours = f'ours in the metric this project reads it as ({what[metric]})'
  else:  # The paper does not say which round it reports.
    ours = f'ours: the {what[metric]}'
  w.add(f'## Beside the paper: {paper["paper"]} {paper["cite"]}', '')
  w.add(f'{paper["citation"]}. {paper["caption"]} The paper\'s metric: '
        f'{paper["metric"]} ({paper["metric_note"] or "no definition given"}); {ours}, '
        f'mean ± std over seeds, at scale `{paper["scale"]}`: {paper["scale_note"]}', '')
  rows = paper.get('rows') or {}
  for method, overrides in (paper.get('method_overrides') or {}).items():
    if method in rows:  # Its overrides name its method first (method.name=...).
      own = [o for o in overrides if o.split('=', 1)[0] != 'method.name']
      w.add(f'`{method}` is `{rows[method]}` with `{" ".join(own)}` (the protocol\'s '
            '`rows`; its runs are reported as the row).', '')
    else:
      w.add(f'`{method}` runs with `{" ".join(overrides)}` (the protocol\'s `method_set`).', '')
  if paper.get('extra_overrides'):
    w.add(f'Every cell ran with `--set {" --set ".join(paper["extra_overrides"])}`, '
          'beyond the protocol.', '')
  also = [m for m in ('last10', 'best') if m != metric]  # Shown for every table.
  rows, gaps, rankings = [], [], []
  for setting, label in paper['settings'].items():
    methods = groups.get(setting) or {}
    numbers = paper['numbers'].get(setting) or {}
    ours = {}
    for method, runs in methods.items():
      stats = {m: reporting.mean_std([paper_metric(r.results, m) for r in runs])
               for m in [metric] + also}
      ours[method] = stats[metric]
      rows.append([label, f'{method} ({paper["methods"].get(method, "?")})',
                   '' if numbers.get(method) is None else f'{numbers[method]:.2f}'] +
                  [reporting.pct(stats[m]) for m in [metric] + also] + [len(runs)])
    baseline = paper['baseline']
    base_ours, base_paper = ours.get(baseline), numbers.get(baseline)
    for method, stats in ours.items():
      if method == baseline or stats is None or base_ours is None:
        continue
      paper_gap = (None if numbers.get(method) is None or base_paper is None
                   else numbers[method] - base_paper)
      per_seed = _paired_gaps(methods[method], methods[baseline], metric)
      spread = reporting.mean_std(list(per_seed.values()))
      if spread is None:  # No seed on which both ran (a grid still under way).
        continue
      gaps.append([label, method, '' if paper_gap is None else f'{paper_gap:+.2f}',
                   f'{100 * spread[0]:+.2f}', f'{100 * spread[1]:.2f}',
                   ', '.join(f'{seed}: {100 * gap:+.2f}' for seed, gap in per_seed.items()),
                   f'{sum(gap > 0 for gap in per_seed.values())} of {len(per_seed)}'])
    both = [m for m in ours if ours[m] is not None and numbers.get(m) is not None]
    if len(both) >= 2:
      by_paper = sorted(both, key=lambda m: -numbers[m])
      by_ours = sorted(both, key=lambda m: -ours[m][0])
      rankings.append([label, ' > '.join(by_paper), ' > '.join(by_ours),
                       'yes' if by_paper == by_ours else 'no'])
  w.table(['setting', 'method (paper row)', f'paper ({paper["metric"]})'] +
          [f'ours ({_label(m, window)})' for m in [metric] + also] + ['seeds'], rows)
  if gaps:
    w.add(f'Method minus {paper["baseline"]} (points, in the paper\'s metric); per seed, '
          f'the method and {paper["baseline"]} ran on the same data; ours: the mean over '
          'the seeds both ran:', '')
    w.table(['setting', 'method', 'paper', 'ours', 'std over seeds', 'seed: ours',
             'seeds above'], gaps)
  if rankings:
    w.add('Ranking of the methods by the paper\'s metric:', '')
    w.table(['setting', 'paper', 'ours', 'same order'], rankings)
  regime = [[paper['settings'].get(setting, setting)] + _memorisation(runs)
            for setting, methods in groups.items()
            for runs in [methods.get(paper['baseline'])] if runs]
  if regime:
    w.add(f'The papers\' regime: {paper["baseline"]} memorises the noisy labels, its test '
          f'accuracy falling from its best round by at least {REGIME_FALL:g} points by the '
          'last (mean over seeds):', '')
    w.table(['setting', 'best', 'last round', 'fall (points)', 'in the regime'], regime)


def _label(metric: str, window: str) -> str:
  """A metric's column name: the actual window for a "last 10" shorter runs cover."""
  return window if metric == 'last10' and window != 'last 10' else metric


def _paired_gaps(runs, baseline_runs, metric: str) -> dict:
  """``{seed: method - baseline}`` in ``metric`` for the seeds both ran, in seed order."""
  base = {r.seed: paper_metric(r.results, metric) for r in baseline_runs}
  gaps = {}
  for run in sorted(runs, key=lambda r: -1 if r.seed is None else r.seed):
    ours = paper_metric(run.results, metric)
    if ours is not None and base.get(run.seed) is not None:
      gaps[run.seed] = ours - base[run.seed]
  return gaps


def _memorisation(runs) -> list:
  """The baseline's best and last accuracy and the fall between them, mean over
  ``runs``."""
  best = [paper_metric(r.results, 'best') for r in runs]
  last = [r.results.get('final_accuracy') for r in runs]
  pairs = [(b, f) for b, f in zip(best, last) if b is not None and f is not None]
  if not pairs:
    return ['n/a'] * 4
  fall = 100 * float(np.mean([b - f for b, f in pairs]))
  return [reporting.pct(reporting.mean_std([b for b, _ in pairs])),
          reporting.pct(reporting.mean_std([f for _, f in pairs])), f'{fall:.1f}',
          'yes' if in_regime(fall) else 'no']
