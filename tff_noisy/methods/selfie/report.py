"""SELFIE's section of ``tff-noisy report``: its refurbished labels against the truth."""

from tff_noisy import reporting


def _last(results) -> dict:
  """The last round's ``refurbishment`` record (its round number under ``round``)."""
  records = [r for r in results.get('rounds', []) if r.get('refurbishment')]
  return dict(records[-1]['refurbishment'], round=records[-1].get('round')) if records else {}


class RefurbishmentSection(reporting.Section):
  round_keys = ('refurbishment',)

  def summary(self, results):
    last = _last(results)
    if last.get('precision') is None and last.get('flips_corrected') is None:
      return []
    return [f'SELFIE refurbishment: {last.get("refurbished")} labels refurbished, '
            f'precision {reporting.num(last.get("precision"))}, flipped labels corrected '
            f'{reporting.num(last.get("flips_corrected"))}']

  def render(self, w, groups):
    rows = []
    has_setting = any(s is not None for s in groups)
    for setting, method, runs in self.found(groups, _last):
      for run in runs:
        last = _last(run.results)
        if last:
          rows.append(([setting] if has_setting else []) + [
              method, reporting.seed_label(run), reporting.num(last.get('round')),
              reporting.num(last.get('clients')), reporting.num(last.get('refurbished')),
              reporting.num(last.get('precision')),
              reporting.num(last.get('flips_corrected'))])
    if rows:
      w.add('## SELFIE refurbishment', '')
      w.add('In the last round, over the examples of every client that has trained: how '
            'many labels are refurbished, the share refurbished to the true label '
            '(precision), and the share of the flipped labels (observed ≠ true) refurbished '
            'to the true one.', '')
      w.table((['setting'] if has_setting else []) + [
          'method', 'run', 'round', 'clients', 'refurbished', 'precision',
          'flips corrected'], rows)


SECTIONS = (RefurbishmentSection(),)
