"""The encoder parameter group: a frozen encoder of client inputs, shared by the methods
that embed them (FedLN's NNC vote, LSC's neighbours); ``embeddings.encoders`` builds it.
``ENCODERS`` names the encoders of this project; any other ``encoder`` is a TF-Hub handle
or a SavedModel directory."""

import dataclasses
from typing import Optional

from tff_noisy import registry
from tff_noisy.params import described, Params, require

_BUILDERS = 'tff_noisy.embeddings.encoders:'  # Each takes (params, train inputs, seed).
ENCODERS = registry.Registry('method.params.encoder', 'encoder', {
    'pca': registry.Entry('PCA fitted label-free on the training inputs, offline '
                          '(pca_components, pca_sqrt)', target=_BUILDERS + 'pca_encoder'),
    'random': registry.Entry("The `embed pretrain` SimCLR backbone randomly initialised and "
                             "frozen (LSC's Table 4 control); needs images",
                             target=_BUILDERS + 'random_encoder'),
})


@dataclasses.dataclass(frozen=True)
class EncoderParams(Params):
  """A frozen encoder of client inputs (NNC's kNN vote; LSC's neighbours)."""
  encoder: str = described('pca', "'pca' (label-free, offline), 'random' or a TF-Hub handle / dir.")
  pca_components: int = described(50, "'pca': the principal components kept (the "
                                        'embedding width).')
  pca_sqrt: bool = described(False, 'PCA of square-rooted inputs (Hellinger distance); '
                             'inputs >= 0.')
  encoder_input_size: Optional[list] = described(None, '[height, width] a hub encoder expects.')
  encoder_channels: Optional[int] = described(
      None, 'Channels a hub encoder expects (gray is tiled).')

  def check(self, rounds):
    require(self.pca_components >= 1, 'pca_components', 'an integer >= 1',
            self.pca_components)
    super().check(rounds)
