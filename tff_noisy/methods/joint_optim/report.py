"""Joint Optimization's section of ``tff-noisy report``: its labels against the truth."""

from tff_noisy import reporting


class CorrectedLabelsSection(reporting.LastRoundSection):
  round_keys = ('corrected_labels',)
  title = 'Joint Optimization labels'
  explanation = ('In the last round, over the examples of every client that has trained: the '
                 'share of labels whose argmax is the true label (accuracy), the share of the '
                 'flipped labels (observed ≠ true) corrected, and the share of the others '
                 'still right.')
  columns = (('clients', 'clients'), ('accuracy', 'accuracy'),
             ('flips corrected', 'flips_corrected'), ('clean kept', 'clean_kept'))

  def summary_line(self, last):
    if last.get('accuracy') is None:
      return None
    return (f'Joint Optimization labels: accuracy {reporting.num(last.get("accuracy"))}, '
            f'flipped labels corrected {reporting.num(last.get("flips_corrected"))}, clean '
            f'labels kept {reporting.num(last.get("clean_kept"))}')


SECTIONS = (CorrectedLabelsSection(),)
