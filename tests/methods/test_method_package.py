"""A method is one folder and one registry line: a method defined only in its own package
(here written into a temporary directory) trains, and its diagnostic, scored against the
simulation truth, reaches results.json, ``tff-noisy compare``'s summary and the report,
with no edit to the driver, the report or another method."""
import json
import sys
import textwrap

import pytest

from tff_noisy import config as config_lib
from tff_noisy import methods
from tff_noisy.report import command as report
from tff_noisy.simulation import driver

_PACKAGE = {
    '__init__.py': '''
        """GCE written as an outside method, with a diagnostic of its own."""
        import dataclasses

        from tff_noisy import reporting
        from tff_noisy.methods import MethodSpec
        from tff_noisy.params import Params, require


        @dataclasses.dataclass(frozen=True)
        class GCEParams(Params):
          q: float = 0.7

          def check(self, rounds):
            require(0 < self.q <= 1, 'q', 'a number in (0, 1]', self.q)
            super().check(rounds)


        def _agreement(results):
          return (results.get('extra') or {}).get('label_agreement') or {}


        class AgreementSection(reporting.Section):
          extra_keys = ('label_agreement',)

          def summary(self, results):
            shares = _agreement(results)
            return [f'labels agreeing with the truth: {min(shares.values()):.2f} at least']

          def render(self, w, groups):
            found = self.found(groups, _agreement)
            if found:
              w.add('## Label agreement', '')
              w.table(['method', 'clients'], [[m, len(_agreement(runs[0].results))]
                                              for _, m, runs in found])


        SPECS = {'test_gce': MethodSpec('GCE from outside', GCEParams,
                                        'test_gce_package.algorithm:gce',
                                        report_sections=(AgreementSection(),))}
        ''',
    'algorithm.py': '''
        import numpy as np
        import tensorflow as tf

        from tff_noisy import diagnostics
        from tff_noisy.federated.client_parts import ClientPart, ON_DEVICE
        from tff_noisy.methods.recipe import Recipe, ServerStep, stored_labels


        class LabelAgreement(diagnostics.Diagnostic):
          """Each client's share of training labels that are its true labels."""

          def __init__(self, labels):
            self.labels = labels

          def scored(self, truth):
            return {'label_agreement': {
                cid: float(np.mean(y == truth.true_labels[cid])) if len(y) else None
                for cid, y in self.labels.items()}}


        class GCELoss(ClientPart):
          device = ON_DEVICE  # Its registry entry is not off_device.

          def __init__(self, q):
            self.q = float(q)

          def loss(self, batch, out, ctx):
            p_y = tf.gather(tf.nn.softmax(out.logits), batch['y'], batch_dims=1)
            return (1.0 - p_y ** self.q) / self.q


        class ReportAgreement(ServerStep):

          def prepare(self, server):
            data = server.data
            return {'label_agreement': LabelAgreement(
                {cid: stored_labels(cid, data, server.store) for cid in data.client_ids})}


        def gce(params, setup):
          return Recipe(parts=(GCELoss(params.q),), server=(ReportAgreement(),))
        ''',
}


@pytest.fixture
def outside_method(tmp_path, monkeypatch):
  package = tmp_path / 'test_gce_package'
  package.mkdir()
  for name, code in _PACKAGE.items():
    (package / name).write_text(textwrap.dedent(code))
  monkeypatch.syspath_prepend(str(tmp_path))
  monkeypatch.setattr(methods, 'METHODS', methods.METHODS.copy())  # Undone after the test.
  module = __import__('test_gce_package')
  methods.register(module.SPECS)  # The registry line.
  yield module
  for name in [m for m in sys.modules if m.startswith('test_gce_package')]:
    del sys.modules[name]


def test_registering_a_name_twice_or_a_non_spec_is_refused(outside_method):
  with pytest.raises(ValueError, match="method 'test_gce' is registered already"):
    methods.register(outside_method.SPECS)
  with pytest.raises(TypeError, match='needs a MethodSpec'):
    methods.register({'other': object()})


def test_an_outside_method_trains_and_its_diagnostic_reaches_results_and_report(
    outside_method, tmp_path, tmp_cache):
  config = config_lib.from_dict({
      'seed': 3, 'data': {'dataset': 'digits'},
      'partition': {'name': 'iid', 'num_clients': 4},
      'noise': {'name': 'symmetric', 'rate': 0.4, 'noisy_fraction': 0.5},
      'model': {'name': 'mlp', 'width': 16},
      'method': {'name': 'test_gce', 'params': {'q': 0.5}},
      'fl': {'rounds': 2, 'participation': 0.5, 'client_runtime': 'tf'}})
  out = tmp_path / 'run'
  driver.run_experiment(config, str(out), progress=False)
  results = json.loads((out / 'results.json').read_text())
  assert results['params'] == {'q': 0.5}
  assert results['rounds'][-1]['train_loss'] is not None
  agreement = results['extra']['label_agreement']
  # Scored against the truth the method never saw: the share of right labels is exactly
  # one minus the client's true noise rate.
  assert agreement == pytest.approx(
      {cid: 1.0 - rate for cid, rate in results['client_noise_rates'].items()})
  assert min(agreement.values()) < 1.0  # Some client is noisy: the check can fail.
  assert report.estimated_summary(results) == [
      f'labels agreeing with the truth: {min(agreement.values()):.2f} at least']
  path, _ = report.write_report(str(out))
  text = open(path).read()
  assert '## Label agreement' in text
  assert 'Other recorded diagnostics' not in text  # The section declared what it reads.
