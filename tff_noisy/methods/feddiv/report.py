"""FedDiv's sections of ``tff-noisy report``: the global filter's split and the training
sets, and the labels its relabelling left, against the truth."""

from tff_noisy import reporting


class SelectionSection(reporting.LastRoundSection):
  round_keys = ('feddiv_selection',)
  title = 'FedDiv clean selection'
  explanation = ("In the last filtering round, over its clients: how many examples the global "
                 'noise filter splits off as clean, their share of right labels (precision) '
                 'and the share of the right labels it keeps (recall), against the labels '
                 'it split on; then the size of the training sets the sampler picked and '
                 'their share of right labels, beside that share over all their examples.')
  columns = (('clients', 'clients'), ('selected', 'selected'), ('precision', 'precision'),
             ('recall', 'recall'), ('trained', 'trained'),
             ('trained precision', 'trained_precision'), ('labels right', 'label_accuracy'))

  def summary_line(self, last):
    if last.get('precision') is None and last.get('recall') is None:
      return None
    return (f'FedDiv clean selection: precision {reporting.num(last.get("precision"))}, '
            f'recall {reporting.num(last.get("recall"))}; training sets '
            f'{reporting.num(last.get("trained_precision"))} right')


class RelabellingSection(reporting.LastRoundSection):
  round_keys = ('feddiv_relabelling',)
  title = 'FedDiv relabelling'
  explanation = ('In the last filtering round, over every client visited so far, against the '
                 'labels the run started from: flipped labels made right (corrected, and '
                 'their share of the flips), right labels made wrong (broken, and their '
                 'share of the right ones), and the wrong labels before and after.')
  columns = (('clients', 'clients'), ('changed', 'changed'), ('corrected', 'corrected'),
             ('flips corrected', 'fixed'), ('broken', 'broken'),
             ('clean broken', 'corrupted'), ('wrong before', 'wrong_before'),
             ('wrong after', 'wrong_after'))

  def summary_line(self, last):
    if last.get('changed') is None:
      return None
    return (f'FedDiv relabelling: {last.get("changed")} labels changed, '
            f'{last.get("corrected")} flips corrected, {last.get("broken")} clean labels '
            f'broken ({last.get("wrong_before")} wrong before, {last.get("wrong_after")} '
            'after)')


SECTIONS = (SelectionSection(), RelabellingSection())
