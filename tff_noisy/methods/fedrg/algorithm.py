"""FedRG (Wen et al., CVPR 2026) as its released code runs it (github Tianjoker/FedRG,
``FedRG/manager.py``, ``client.py``, ``server.py``): each client trains FedRG's client model
(``model``) on its part (``parts``); the server averages the model as any (FedAvg in the
code; here the configured aggregator) and evaluates the head. Before round T it sets
``fedrg_stage`` = T > T_w (Stage I: rounds 1..T_w, SimCLR) and the round's seed of the
second views; each client's key (its place among the clients) is a dataset field. After
every Stage II round it reads the clients' splits and matrices from the store and reports
them against the truth (``diagnostics.CleanSelection``).

Reports: every round ``fedrg_stage``; in Stage II ``fedrg_selection``.
"""

import numpy as np

import models
from tff_noisy.errors import ConfigError
from tff_noisy.methods import contract
from tff_noisy.methods.fedrg import parts as fedrg_parts
from tff_noisy.methods.fedrg.diagnostics import CleanSelection
from tff_noisy.methods.fedrg.layout import Layout
from tff_noisy.methods.fedrg.model import carrier_index, fedrg_model


def stage_two(round_num: int, warmup_rounds: int) -> bool:
  """Whether round T = 1, 2, ... is a Stage II round: T > T_w."""
  return round_num > warmup_rounds


class StagesAndReport(contract.KeyedClients):
  """The stage and the views' seed before each round; the splits after Stage II ones."""

  def __init__(self, warmup_rounds: int, layout: Layout, seed: int):
    self.warmup_rounds = int(warmup_rounds)
    self.layout = layout
    self.seed = int(seed)

  def before(self, round_num, state, server):
    on = stage_two(round_num, self.warmup_rounds)
    seed = self.round_seed(round_num)
    state = server.process.set_hparams(state, {fedrg_parts.STAGE: np.float32(on),
                                               fedrg_parts.SEED: seed})
    return state, {fedrg_parts.STAGE: int(on)}

  def after(self, round_num, state, server):
    if not stage_two(round_num, self.warmup_rounds):
      return state, {}
    program, data = server.process.program, server.data
    selections, transitions = {}, {}
    for cid in data.client_ids:
      if not len(data.y[cid]):
        continue
      kept = server.store.objective_state(cid, program, data.y[cid])
      pieces = self.layout.unpack(np.asarray(kept[fedrg_parts.STATE], np.float64))
      if pieces['median_set'] > 0.5:  # It has run a Stage II step.
        selections[cid] = np.asarray(kept[fedrg_parts.SELECTION])
        transitions[cid] = pieces['t']
    return state, {fedrg_parts.SELECTION: CleanSelection(selections, transitions)}


def image_fields(data) -> dict:
  """The client's key field, for data of images [H, W, channels] only (the second view
  is an image augmentation): a ConfigError before any work for other inputs."""
  shape = tuple(data.input_shape)
  if len(shape) != 3:
    raise ConfigError(f"method.name: fedrg's second view needs image inputs [height, "
                      f'width, channels]; the data\'s inputs have shape {shape}')
  return {contract.MIX_KEY: (np.int32, ())}


def fedrg(params, setup) -> contract.Recipe:
  """FedRG's two stages on its client model, FedAvg on the server (module doc)."""
  dim = models.feature_dim(setup.model_fn())
  layout = Layout(setup.num_classes, params.components(setup.num_classes), dim)

  def client_model(model_fn):
    return fedrg_model(model_fn, layout.size, params.projector_hidden, params.projector_dim)

  index = carrier_index(client_model(setup.model_fn)())
  step = StagesAndReport(params.warmup(setup.rounds), layout, setup.seed)
  part = fedrg_parts.FedRGLoss(layout, index, params.projector_dim, params,
                               setup.weight_decay, setup.seed)
  return contract.Recipe(parts=(part,), client_model=client_model,
                         data=contract.DataPlan(fields=image_fields, extras=step.extras),
                         server=(step,))
