"""FedDS's section of ``tff-noisy report``: its reliabilities and the weights they gave,
per client, against the true noise rates (drawn with the other per-client estimates)."""

from tff_noisy.methods.noisy_clients import ClientScoreSection

SECTIONS = (ClientScoreSection('reliabilities', 'reliability_correlation', 'fedds_weights',
                               'reliability'),)
