"""FedDiv (Li et al., AAAI 2024): a federated noise filter (a two-component loss GMM the
clients fit locally and the server averages) splits each client's examples into clean and
noisy; a predictive-consistency sampler keeps the clean ones and relabels the noisy ones
on which the global model and the client's de-biased local model agree; FedAvg on the
selected, relabelled examples after a sequential warm-up."""

import dataclasses

from tff_noisy.methods.common import MethodSpec
from tff_noisy.methods.feddiv import report
from tff_noisy.params import described, Params, require

FILTER_LOSSES = ('softmax_cross_entropy', 'cross_entropy')  # ops.feddiv.LOSSES


@dataclasses.dataclass(frozen=True)
class FedDivParams(Params):
  """FedDiv (Li et al. 2024; defaults: its released code's, lijichang/FLNL-FedDiv). Rounds
  1..warmup_rounds are warm-up iterations (every client trains once in each, in groups of
  a warmup_fraction share of the clients aggregated one after the other); the other
  rounds filter, relabel and train the config's sample (the code's rounds1 + rounds2)."""
  warmup_rounds: int = described(5, 'Warm-up iterations, one round each, every client once '
                                 '(code iteration1 5).')
  warmup_fraction: float = described(0.01, "Share of the clients in each warm-up group (code "
                                     'frac1 0.01: one client at a time among 100).')
  filter_iterations: int = described(3, "EM steps of a client's local filter from the global "
                                     "one (code Server's local_epochs 3).")
  clean_probability: float = described(0.5, 'An example is clean when the global filter gives '
                                       'its smaller-mean component a posterior above it '
                                       '(code 0.50).')
  filter_loss: str = described('softmax_cross_entropy', "The filters' per-example loss: "
                               "'softmax_cross_entropy' (the code's CE on softmax outputs) "
                               "or 'cross_entropy' (−log p_y).")
  clean_set_threshold: float = described(0.1, 'A client whose estimated noise level is at '
                                         'most it trains on every example, labels as they '
                                         'are (code clean_set_thres).')
  relabel_threshold: float = described(0.2, 'From sampler_start visits on, a client also '
                                       'trains on its relabelled examples when its estimated '
                                       'noise level exceeds it (code 0.20).')
  sampler_start: int = described(5, "Visits before the predictive-consistency sampler picks "
                                 "a client's training set (code idx_cnt >= 5).")
  confidence: float = described(0.0, "A noisy example is relabelled only where the global "
                                "model's largest probability exceeds it (code conf 0).")
  xi: float = described(0.2, "ξ: de-biasing strength, softmax(log p − ξ log p̂) (code xi).")
  prior_momentum: float = described(0.5, 'm: momentum of the class prior p̂ (code m).')
  prior_confidence: float = described(0.85, 'p̂ averages the local probabilities of the '
                                      'examples whose largest de-biased probability exceeds '
                                      'it (code 0.85).')

  def check(self, rounds):
    require(0 <= self.warmup_rounds < rounds, 'warmup_rounds',
            f'an integer in [0, fl.rounds={rounds})', self.warmup_rounds)
    require(0 < self.warmup_fraction <= 1, 'warmup_fraction', 'a share in (0, 1]',
            self.warmup_fraction)
    require(self.filter_iterations >= 1, 'filter_iterations', 'an integer >= 1',
            self.filter_iterations)
    require(0 < self.clean_probability < 1, 'clean_probability', 'a probability in (0, 1)',
            self.clean_probability)
    require(self.filter_loss in FILTER_LOSSES, 'filter_loss',
            "'softmax_cross_entropy' or 'cross_entropy'", self.filter_loss)
    for name in ('clean_set_threshold', 'relabel_threshold'):
      require(0 <= getattr(self, name) <= 1, name, 'a share in [0, 1]', getattr(self, name))
    require(self.sampler_start >= 0, 'sampler_start', 'an integer >= 0', self.sampler_start)
    require(0 <= self.confidence < 1, 'confidence', 'a probability in [0, 1)', self.confidence)
    require(self.xi >= 0, 'xi', 'a number >= 0', self.xi)
    require(0 <= self.prior_momentum < 1, 'prior_momentum', 'a number in [0, 1)',
            self.prior_momentum)
    require(0 <= self.prior_confidence < 1, 'prior_confidence', 'a probability in [0, 1)',
            self.prior_confidence)
    super().check(rounds)


SPECS = {
    'feddiv': MethodSpec(
        'FedDiv: a federated loss-GMM noise filter, predictive-consistency sampling and '
        'relabelling of each client\'s examples, FedAvg on the selection after a sequential '
        'warm-up', FedDivParams, 'tff_noisy.methods.feddiv.algorithm:feddiv',
        off_device="its server selects and relabels each client's examples and reads its "
        "local model's outputs on all of them from its update",
        report_sections=report.SECTIONS, display='FedDiv'),
}
