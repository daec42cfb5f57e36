"""SELFIE's section of ``tff-noisy report``: its refurbished labels against the truth."""

from tff_noisy import reporting


class RefurbishmentSection(reporting.LastRoundSection):
  round_keys = ('refurbishment',)
  title = 'SELFIE refurbishment'
  explanation = ('In the last round, over the examples of every client that has trained: how '
                 'many labels are refurbished, the share refurbished to the true label '
                 '(precision), and the share of the flipped labels (observed ≠ true) '
                 'refurbished to the true one.')
  columns = (('clients', 'clients'), ('refurbished', 'refurbished'),
             ('precision', 'precision'), ('flips corrected', 'flips_corrected'))

  def summary_line(self, last):
    if last.get('precision') is None and last.get('flips_corrected') is None:
      return None
    return (f'SELFIE refurbishment: {last.get("refurbished")} labels refurbished, '
            f'precision {reporting.num(last.get("precision"))}, flipped labels corrected '
            f'{reporting.num(last.get("flips_corrected"))}')


SECTIONS = (RefurbishmentSection(),)
