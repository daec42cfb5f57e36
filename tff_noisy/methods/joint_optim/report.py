"""Joint Optimization's section of ``tff-noisy report``: its labels against the truth."""

from tff_noisy import reporting


def _last(results) -> dict:
  """The last round's ``corrected_labels`` record (its round number under ``round``)."""
  records = [r for r in results.get('rounds', []) if r.get('corrected_labels')]
  return (dict(records[-1]['corrected_labels'], round=records[-1].get('round')) if records
          else {})


class CorrectedLabelsSection(reporting.Section):
  round_keys = ('corrected_labels',)

  def summary(self, results):
    last = _last(results)
    if last.get('accuracy') is None:
      return []
    return [f'Joint Optimization labels: accuracy {reporting.num(last.get("accuracy"))}, '
            f'flipped labels corrected {reporting.num(last.get("flips_corrected"))}, clean '
            f'labels kept {reporting.num(last.get("clean_kept"))}']

  def render(self, w, groups):
    rows = []
    has_setting = any(s is not None for s in groups)
    for setting, method, runs in self.found(groups, _last):
      for run in runs:
        last = _last(run.results)
        if last:
          rows.append(([setting] if has_setting else []) + [
              method, reporting.seed_label(run), reporting.num(last.get('round')),
              reporting.num(last.get('clients')), reporting.num(last.get('accuracy')),
              reporting.num(last.get('flips_corrected')),
              reporting.num(last.get('clean_kept'))])
    if rows:
      w.add('## Joint Optimization labels', '')
      w.add("In the last round, over the examples of every client that has trained: the "
            "share of labels whose argmax is the true label (accuracy), the share of the "
            'flipped labels (observed ≠ true) corrected, and the share of the others still '
            'right.', '')
      w.table((['setting'] if has_setting else []) + [
          'method', 'run', 'round', 'clients', 'accuracy', 'flips corrected',
          'clean kept'], rows)


SECTIONS = (CorrectedLabelsSection(),)
