"""The recipes of ``combined``'s methods: SCAFFOLD's or MOON's recipe with FedDS's
weighting and the server step that prepares it."""

from tff_noisy.methods.fedds import algorithm as fedds
from tff_noisy.methods.moon import algorithm as moon
from tff_noisy.methods.recipe import combine, Recipe
from tff_noisy.methods.scaffold import algorithm as scaffold


def fedds_scaffold(params, setup) -> Recipe:
  """SCAFFOLD's clients and control variates, FedDS's Dawid-Skene aggregation weights."""
  return combine(scaffold.scaffold(params, setup), weighting=fedds.fedds(params, setup))


def fedds_moon(params, setup) -> Recipe:
  """MOON's clients, FedDS's Dawid-Skene aggregation weights."""
  return combine(moon.moon(params, setup), weighting=fedds.fedds(params, setup))
