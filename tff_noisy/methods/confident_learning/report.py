"""Confident Learning's section of ``tff-noisy report``: the label issues it dropped,
against the truth."""

from tff_noisy import reporting

_EXTRA = ('confident_learning', 'label_issues')


def _issues(results) -> dict:
  return ((results.get('extra') or {}).get('label_issues') or {}).get('overall') or {}


class LabelIssuesSection(reporting.Section):
  extra_keys = _EXTRA

  def summary(self, results):
    overall = _issues(results)
    if not overall:
      return []
    return [f'label issues: {overall["flagged"]} flagged of {overall["examples"]} labels; '
            f'precision {reporting.num(overall.get("precision"))}, recall '
            f'{reporting.num(overall.get("recall"))} of the wrong ones']

  def render(self, w, groups):
    found = self.found(groups, _issues)
    if not found:
      return
    w.add('## Label issues dropped (Confident Learning)', '')
    w.add('Examples each client flagged and left out of training, against the true '
          'labels: precision (flagged labels that are wrong), recall (wrong labels '
          'flagged).', '')
    has_setting = any(s is not None for s, _, _ in found)
    rows = []
    for setting, method, runs in found:
      for run in runs:
        overall = _issues(run.results)
        rows.append(([setting] if has_setting else []) + [
            method, reporting.seed_label(run)] + [
                reporting.num(overall.get(k)) for k in
                ('examples', 'flagged', 'wrong_labels', 'precision', 'recall')])
    w.table((['setting'] if has_setting else []) + [
        'method', 'run', 'examples', 'flagged', 'wrong labels', 'precision', 'recall'],
        rows)


SECTIONS = (LabelIssuesSection(),)
