"""FOCUS (Chen et al. 2020): each client's credibility, from the mutual cross-entropy
between the global model on its data and its local model on the server's clean labelled
benchmark set, as its aggregation weight (FedDS Table 5's row; docs/methods.md)."""

import dataclasses
import math

from tff_noisy.methods.common import MethodSpec
from tff_noisy.methods.noisy_clients import ClientScoreSection
from tff_noisy.params import described, Params, require


@dataclasses.dataclass(frozen=True)
class FocusParams(Params):
  alpha: float = described(10.0, 'α of C_k = 1 - softmax(α E)_k (not found in the text read; '
                           'the one public reimplementation uses 10).')
  times_examples: bool = described(True, 'Weights C_k n_k (True) or C_k alone.')

  def check(self, rounds):
    require(math.isfinite(self.alpha) and self.alpha > 0, 'alpha', 'a finite number > 0',
            self.alpha)
    super().check(rounds)


SPECS = {
    'focus': MethodSpec(
        "FOCUS: credibility from the global model's loss on a client's labels plus its "
        "local model's on the server's clean labelled set", FocusParams,
        'tff_noisy.methods.focus.algorithm:focus', needs_public_split=True,
        needs_public_labels=True, display='FOCUS',
        report_sections=(ClientScoreSection('focus_credibility',
                                            'focus_credibility_correlation',
                                            'focus_weights', 'credibility'),)),
}
