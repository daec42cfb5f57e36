"""DivideMix's section of ``tff-noisy report``: each network's labelled set against the
clean labels."""

from tff_noisy import reporting


class SelectionSection(reporting.LastRoundSection):
  round_keys = ('dividemix_selection',)
  title = 'DivideMix clean selection'
  explanation = ("In the last round, over every client's latest division: for each network's "
                 'GMM, how many examples it labels clean (w > τ, the set the other network '
                 'trains on as labelled), their share of clean labels (precision, observed = '
                 'true) and the share of the clean labels it selects (recall).')
  columns = (('clients', 'clients'),) + tuple(
      (f'{key} {name}', f'{key}_{name}') for name in 'fg'
      for key in ('selected', 'precision', 'recall'))

  def summary_line(self, last):
    if last.get('precision_f') is None and last.get('precision_g') is None:
      return None
    return (f'DivideMix clean selection: precision {reporting.num(last.get("precision_f"))} / '
            f'{reporting.num(last.get("precision_g"))}, recall '
            f'{reporting.num(last.get("recall_f"))} / {reporting.num(last.get("recall_g"))} '
            '(network f / g)')


SECTIONS = (SelectionSection(),)
