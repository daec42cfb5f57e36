"""``ClientResults`` built from stacked row blocks: each client's result made when read."""
import numpy as np
import pytest

from tff_noisy.federated import client_work


def _blocks(sizes, seed=0):
  rng = np.random.default_rng(seed)
  return [client_work.model_weights_of_values(
      [rng.standard_normal((n, 3, 2)).astype(np.float32),
       rng.standard_normal((n, 2)).astype(np.float32)],
      [rng.standard_normal((n, 4)).astype(np.float32)]) for n in sizes]


@pytest.mark.parametrize('sizes', [[5], [2, 3, 1], [1, 1, 1, 1]])
def test_each_client_reads_its_own_row_of_its_block(sizes):
  blocks = _blocks(sizes)
  weights = np.arange(1, sum(sizes) + 1, dtype=np.float32)
  results = client_work.ClientResults.of_blocks(blocks, weights)
  assert len(results) == sum(sizes) and results.stacked_blocks is blocks
  rows = [(b, r) for b, n in zip(blocks, sizes) for r in range(n)]
  for c, (result, (block, row)) in enumerate(zip(results, rows)):
    assert result.update_weight == weights[c]
    for got, want in zip(result.update.trainable + result.update.non_trainable,
                         block.trainable + block.non_trainable):
      np.testing.assert_array_equal(got, want[row])
      assert np.shares_memory(got, want)  # A view of the row, not a copy.
  np.testing.assert_array_equal(results[-1].update.trainable[0], blocks[-1].trainable[0][-1])
  assert [r.update_weight for r in results[1:3]] == list(weights[1:3])
  with pytest.raises(IndexError):
    results[sum(sizes)]  # pylint: disable=pointless-statement


def test_update_weights_of_reads_client_results_and_plain_lists_alike():
  blocks = _blocks([2, 2])
  stacked = client_work.ClientResults.of_blocks(blocks, [0.5, 1.0, 2.0, 0.0])
  listed = client_work.ClientResults(list(stacked))
  plain = list(stacked)
  for results in (stacked, listed, plain):
    got = client_work.update_weights_of(results)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, [0.5, 1.0, 2.0, 0.0])
  assert listed.stacked_blocks is None and len(listed) == 4
