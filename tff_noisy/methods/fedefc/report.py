"""FedEFC's section of ``tff-noisy report``: the prestopping switch and signal, and the
transition matrices' errors at the switch (FedEFC and plain forward correction)."""

import functools
from typing import Dict, Optional, Tuple

from tff_noisy import reporting
from tff_noisy.methods.common import display_name


def plot_prestop(series: Dict[str, Tuple[list, list, Optional[int]]], title: str,
                 path: str) -> None:
  """The signal per round of each seed, its switch round a dashed line named in the
  legend."""
  plt = reporting.pyplot()
  fig, ax = plt.subplots(figsize=(4.6, 2.8))
  for i, (label, (rounds, signal, switch)) in enumerate(series.items()):
    look = reporting.style(i)
    ax.plot(rounds, signal, linewidth=1.1, markersize=3.5,
            markevery=max(1, len(rounds) // 8), label=label,
            **{**look, 'linestyle': '-'})
    if switch is not None:
      ax.axvline(switch, color=look['color'], linestyle='--', linewidth=1,
                 label=f'{label}: switch after round {switch}')
  ax.set_xlabel('round')
  ax.set_ylabel('prestopping signal')
  ax.set_title(title)
  ax.grid(alpha=0.3)
  ax.legend()
  reporting.save(fig, path)


def _switch(results) -> Optional[int]:
  """The switch round a run recorded (the last round trained with cross-entropy)."""
  prestop = [r['prestop'] for r in results.get('rounds', []) if r.get('prestop')]
  return prestop[-1].get('switch_round') if prestop else None


class PrestopSection(reporting.Section):
  round_keys = ('prestop', 'transition_matrix_error')

  def events(self, results):
    switch = _switch(results)
    return {} if switch is None else {'prestopping switch': switch}

  def summary(self, results):
    lines = []
    records = results.get('rounds', [])
    prestop = [r['prestop'] for r in records if r.get('prestop')]
    if prestop:
      switch = prestop[-1].get('switch_round')
      lines.append('no switch to correction' if switch is None else
                   f'switched to correction after round {switch}')
    errors = [r['transition_matrix_error'] for r in records
              if r.get('transition_matrix_error')]
    for name, report in (errors[0] if errors else {}).items():
      lines.append(f'{name} transition matrices vs the true ones: mean cosine '
                   f'{reporting.num(report.get("mean_cosine"))}, mean L1 '
                   f'{reporting.num(report.get("mean_l1"))}')
    return lines

  def render(self, w, groups):
    found = self.found(groups, lambda results: any(
        rec.get('prestop') or rec.get('transition_matrix_error')
        for rec in results.get('rounds', [])))
    if not found:
      return
    w.add('## Prestopping and transition matrices (FedEFC, forward correction)', '')
    w.add('The switch round is the last round trained with plain cross-entropy; correction '
          'starts after it (a dotted line on the accuracy curves). The matrix errors '
          'compare the estimated per-client transition matrices with the true ones (L1: '
          'lower is better; cosine: higher is better).', '')
    rows, figures = [], []
    for setting, method, runs in found:
      series = {}
      for run in runs:
        records = run.results.get('rounds', [])
        prestop = [r for r in records if r.get('prestop')]
        switch = _switch(run.results)
        errors = [r for r in records if r.get('transition_matrix_error')]
        base = ([setting] if setting is not None else []) + [
            method, reporting.seed_label(run), reporting.num(switch) if prestop else 'n/a']
        if switch is None and prestop:
          base[-1] = 'no switch'
        if errors:
          for name, report in errors[0]['transition_matrix_error'].items():
            rows.append(base + [f'{name} (round {errors[0]["round"]})',
                                reporting.num(report.get('mean_l1')),
                                reporting.num(report.get('mean_cosine')),
                                len(report.get('per_client') or {})])
        else:
          rows.append(base + ['not recorded', '', '', ''])
        signal = [(r['round'], r['prestop'].get('signal')) for r in prestop
                  if r['prestop'].get('signal') is not None]
        if signal:
          series[reporting.seed_label(run)] = ([p[0] for p in signal], [p[1] for p in signal],
                                               switch)
      if series:
        kind = next((r['prestop'].get('signal_kind') for run in runs
                     for r in run.results.get('rounds', []) if r.get('prestop')), None)
        figures.append((
            f'{method}{f" ({setting})" if setting else ""}: the prestopping signal'
            f'{f" ({kind})" if kind else ""} per round; the dashed line is the switch.',
            functools.partial(plot_prestop, series,
                              f'{display_name(method)}: prestopping signal'),
            reporting.slug('report', setting, method, 'prestop') + '.png',
            f'{method} prestopping signal'))
    has_setting = any(s is not None for s, _, _ in found)
    w.table((['setting'] if has_setting else []) + [
        'method', 'run', 'switch round', 'matrix estimator', 'mean L1', 'mean cosine',
        'clients'], rows)
    w.figures_after(figures)


SECTIONS = (PrestopSection(),)
