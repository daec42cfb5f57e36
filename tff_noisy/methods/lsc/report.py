"""LSC's section of ``tff-noisy report``: the encoder's in-batch neighbour purity."""

from tff_noisy import reporting


def _purity(results) -> dict:
  return (results.get('extra') or {}).get('lsc') or {}


class NeighbourPuritySection(reporting.Section):
  extra_keys = ('lsc',)

  def render(self, w, groups):
    rows = []
    has_setting = any(s is not None for s in groups)
    for setting, method, runs in self.found(groups, _purity):
      for run in runs:
        lsc = _purity(run.results)
        if lsc:
          rows.append(([setting] if has_setting else []) + [
              method, reporting.seed_label(run), reporting.num(lsc.get('neighbour_purity')),
              reporting.num(lsc.get('same_label_chance')), reporting.num(lsc.get('k')),
              f'`{str(lsc.get("encoder"))[:24]}`'])
    if rows:
      w.add('## LSC neighbour purity', '')
      w.add('Neighbour purity: the share of an example\'s in-batch nearest neighbours (in '
            'the encoder\'s embedding) with the same true label; same-label chance: that '
            'share for random in-batch pairs.', '')
      w.table((['setting'] if has_setting else []) + [
          'method', 'run', 'neighbour purity', 'same-label chance', 'k', 'encoder'], rows)


SECTIONS = (NeighbourPuritySection(),)
