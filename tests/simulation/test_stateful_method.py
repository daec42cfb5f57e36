"""A toy stateful method through the driver: client state persists, phases survive resume.

The toy counts each client's rounds in its client part's state, and the server switches a
phase (a loss scale broadcast as an hparam) once the round's training accuracy passes a
threshold: both are decided by earlier rounds, so a resumed run only equals the
uninterrupted one if the checkpoint keeps them.
"""
import collections

import numpy as np
import pytest
import tensorflow as tf

import helpers
from tff_noisy import config as config_lib
from tff_noisy import methods
from tff_noisy.methods.recipe import Recipe, ServerStep
from tff_noisy.params import Params
from tff_noisy.federated.client_parts import ClientPart
from tff_noisy.ops import losses
from tff_noisy.simulation import client_state


class _PhasedCounting(ClientPart):
  state_spec = {'rounds': tf.TensorSpec([], tf.int32)}
  hparams = {'phase': np.int32(0)}

  def initial_state(self, labels):
    return {'rounds': np.int32(0)}

  def loss(self, batch, out, ctx):
    scale = 1.0 + tf.cast(ctx.hparams['phase'], tf.float32)
    return scale * losses.cross_entropy(batch['y'], out.logits)

  def finish(self, ctx):
    ctx.state['rounds'] = ctx.state['rounds'] + 1


class _SwitchPhase(ServerStep):

  def after(self, round_num, state, server):
    phase = int(server.process.get_hparams(state)['phase'])
    if phase == 0 and server.metrics['train_accuracy'] > 0.5:
      return server.process.set_hparams(state, {'phase': 1}), {'phase_switched': round_num}
    return state, {}


def _toy_method(params, setup):
  return Recipe(parts=(_PhasedCounting(),), server=(_SwitchPhase(),))


@pytest.fixture
def toy(monkeypatch):
  monkeypatch.setattr(methods, 'METHODS', methods.METHODS.copy())  # Undone after the test.
  methods.register({'toy': methods.MethodSpec('a toy stateful method', Params, _toy_method)})


def _config(rounds):
  return config_lib.from_dict({
      'seed': 5, 'data': {'dataset': 'digits'},
      'partition': {'name': 'iid', 'num_clients': 5},
      'noise': {'name': 'symmetric', 'rate': 0.2, 'noisy_fraction': 0.4},
      'model': {'name': 'mlp'}, 'method': {'name': 'toy'},
      'fl': {'rounds': rounds, 'clients_per_round': 2, 'batch_size': 32, 'client_lr': 0.1,
             'checkpoint_every': 2},
  })


def _counters(store, client_ids):
  return {cid: int(store.get(cid, 'objective.rounds', -1)) for cid in client_ids}


@pytest.mark.slow
def test_only_sampled_clients_state_changes_and_phase_switches(tmp_path, tmp_cache, toy):
  simulation = helpers.run_with_restarts(_config(4), str(tmp_path))
  sampled = collections.Counter(cid for r in simulation.history for cid in r['clients'])
  ids = simulation.client_ids
  assert _counters(simulation.store, ids) == {cid: sampled.get(cid, -1) for cid in ids}
  assert len(sampled) < len(ids) or max(sampled.values()) > 1  # Not every client alike.
  switched = [r['round'] for r in simulation.history if 'phase_switched' in r]
  assert len(switched) == 1 and switched[0] < 4


@pytest.mark.slow
def test_a_restart_equals_the_uninterrupted_run(tmp_path, tmp_cache, toy):
  reference = helpers.run_with_restarts(_config(6), str(tmp_path / 'ref'))
  resumed = helpers.run_with_restarts(_config(6), str(tmp_path / 'restarted'),
                                      restart_after=[4])
  keys = ('clients', 'train_loss', 'test_accuracy', 'phase_switched')
  assert [{k: r.get(k) for k in keys} for r in resumed.history] == [
      {k: r.get(k) for k in keys} for r in reference.history]
  assert (_counters(resumed.store, resumed.client_ids)
          == _counters(reference.store, reference.client_ids))


def test_state_of_the_wrong_shape_is_a_clear_error():
  spec = {'offsets': tf.TensorSpec([None, 3], tf.float32)}
  with pytest.raises(client_state.ClientStateError,
                     match=r"client c1: state 'offsets' has shape \(4, 2\) but the "
                           r'objective declares \(None, 3\)'):
    client_state.check_state(spec, {'offsets': np.zeros((4, 2), np.float32)}, 'c1')
  with pytest.raises(client_state.ClientStateError, match='dtype float64'):
    client_state.check_state(spec, {'offsets': np.zeros((4, 3))}, 'c1')
  with pytest.raises(client_state.ClientStateError, match=r"declares \['offsets'\]"):
    client_state.check_state(spec, {}, 'c1')
