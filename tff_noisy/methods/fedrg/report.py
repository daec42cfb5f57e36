"""FedRG's section of ``tff-noisy report``: the geometry model's clean/noisy split against
the true flips and the noise absorption matrices against the true ones."""

from tff_noisy import reporting


class SelectionSection(reporting.LastRoundSection):
  round_keys = ('fedrg_selection',)
  title = 'FedRG clean selection'
  explanation = ("In the last round, over every client's latest Stage II split (each example "
                 'as its last step saw it): how many examples the GMM of 1 − P_clean flags '
                 'clean, their share of clean labels (precision, observed = true), the share '
                 'of the clean labels flagged clean (recall) and of the wrong labels flagged '
                 'noisy (noise recall), the mean P_clean of clean and of wrong labels, and '
                 "the mean absolute error of the clients' noise absorption matrices T against "
                 'their true transition matrices (beside the identity\'s).')
  columns = (('clients', 'clients'), ('split', 'split'), ('selected', 'selected'),
             ('precision', 'precision'), ('recall', 'recall'),
             ('noise recall', 'noise_recall'), ('P_clean clean', 'p_clean_clean'),
             ('P_clean noisy', 'p_clean_noisy'), ('T error', 'transition_error'),
             ('I error', 'identity_error'))

  def summary_line(self, last):
    if last.get('precision') is None:
      return None
    return (f'FedRG clean selection: precision {reporting.num(last.get("precision"))}, '
            f'recall {reporting.num(last.get("recall"))}, noise recall '
            f'{reporting.num(last.get("noise_recall"))}; T error '
            f'{reporting.num(last.get("transition_error"))} (identity '
            f'{reporting.num(last.get("identity_error"))})')


SECTIONS = (SelectionSection(),)
