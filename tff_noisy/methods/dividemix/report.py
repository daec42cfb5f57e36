"""DivideMix's section of ``tff-noisy report``: each network's labelled set against the
clean labels."""

from tff_noisy import reporting


def _last(results) -> dict:
  """The last round's ``dividemix_selection`` record (its round number under ``round``)."""
  records = [r for r in results.get('rounds', []) if r.get('dividemix_selection')]
  return dict(records[-1]['dividemix_selection'],
              round=records[-1].get('round')) if records else {}


class SelectionSection(reporting.Section):
  round_keys = ('dividemix_selection',)

  def summary(self, results):
    last = _last(results)
    if last.get('precision_f') is None and last.get('precision_g') is None:
      return []
    return [f'DivideMix clean selection: precision {reporting.num(last.get("precision_f"))} / '
            f'{reporting.num(last.get("precision_g"))}, recall '
            f'{reporting.num(last.get("recall_f"))} / {reporting.num(last.get("recall_g"))} '
            '(network f / g)']

  def render(self, w, groups):
    rows = []
    has_setting = any(s is not None for s in groups)
    for setting, method, runs in self.found(groups, _last):
      for run in runs:
        last = _last(run.results)
        if last:
          rows.append(([setting] if has_setting else []) + [
              method, reporting.seed_label(run), reporting.num(last.get('round')),
              reporting.num(last.get('clients'))] + [
                  reporting.num(last.get(f'{key}_{name}')) for name in 'fg'
                  for key in ('selected', 'precision', 'recall')])
    if rows:
      w.add('## DivideMix clean selection', '')
      w.add("In the last round, over every client's latest division: for each network's "
            'GMM, how many examples it labels clean (w > τ, the set the other network '
            'trains on as labelled), their share of clean labels (precision, observed = '
            'true) and the share of the clean labels it selects (recall).', '')
      w.table((['setting'] if has_setting else []) + [
          'method', 'run', 'round', 'clients', 'selected f', 'precision f', 'recall f',
          'selected g', 'precision g', 'recall g'], rows)


SECTIONS = (SelectionSection(),)
