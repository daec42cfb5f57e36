"""FedRN's section of ``tff-noisy report``: the last round's clean sets against the clean
labels, and how noisy the chosen neighbours are."""

from tff_noisy import reporting


class SelectionSection(reporting.LastRoundSection):
  round_keys = ('fedrn_selection',)
  title = 'FedRN clean selection'
  explanation = ("In the last round, over the examples of its clients that selected: the "
                 "clean set of each client's own last local model's GMM (own) and the set "
                 'it trains on, from the reliability-weighted GMM ensemble with its '
                 "neighbours' fine-tuned models: their sizes, their share of clean labels "
                 '(precision, observed = true) and the share of the clean labels they '
                 'select (recall); the mean true noise rate of the chosen neighbours and of '
                 'every client they were chosen from.')
  columns = (('clients', 'clients'), ('selected own', 'selected_own'),
             ('precision own', 'precision_own'), ('recall own', 'recall_own'),
             ('selected', 'selected'), ('precision', 'precision'), ('recall', 'recall'),
             ('neighbour noise', 'neighbour_noise_rate'),
             ('candidate noise', 'candidate_noise_rate'))

  def summary_line(self, last):
    if last.get('precision') is None:
      return None
    return (f'FedRN clean selection: precision {reporting.num(last.get("precision"))} '
            f'(own model {reporting.num(last.get("precision_own"))}), recall '
            f'{reporting.num(last.get("recall"))} (own model '
            f'{reporting.num(last.get("recall_own"))}); neighbours\' noise rate '
            f'{reporting.num(last.get("neighbour_noise_rate"))} of '
            f'{reporting.num(last.get("candidate_noise_rate"))}')


SECTIONS = (SelectionSection(),)
