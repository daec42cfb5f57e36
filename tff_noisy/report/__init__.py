"""``tff-noisy report``: the command, above the simulation it reads the results of, kept
apart from ``tff_noisy.reporting`` (the building blocks the methods' report sections
import). Never TensorFlow.

- ``command``: the report of a run, compare or grid directory (``write_report``,
  ``publish``);
- ``paper_table``: a reproduced table beside the paper's numbers (``tff-noisy
  reproduce``'s grids).
"""
