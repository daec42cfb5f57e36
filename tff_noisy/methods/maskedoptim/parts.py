"""MaskedOptim's client part: the shared label-correction part
(``methods.label_correction``, whose module doc describes it), with its names."""

from tff_noisy.methods.label_correction import LABEL_LOGITS, MaskedOptimLoss, NOISY

__all__ = ['LABEL_LOGITS', 'MaskedOptimLoss', 'NOISY']
