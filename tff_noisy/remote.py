"""A run's TFF computations on remote workers (``--workers host:port,...``).

TFF's route to more than one machine: :func:`on_workers` installs a
``MergeableCompExecutionContext`` (``tff.backends.native``) over one asynchronous remote
context per worker (a ``RemoteExecutor`` on a gRPC channel, ``workers.channel``: secure,
with the driver's client certificate, when ``$TFF_NOISY_WORKER_CERTS`` is set). Each
computation is compiled to ``MergeableCompForm``: ``up_to_merge`` (everything up to its
aggregations, which must not depend on one another), ``merge`` (the aggregations' merge
step) and ``after_merge`` (the rest). The clients of a call are split into one
contiguous group per worker; each worker runs ``up_to_merge`` on its group, the partial
aggregates are merged, and ``after_merge`` runs on each group again for CLIENTS-placed
results (the clients' new states: a worker trains its clients a second time to return
them, so the result is the same but a round costs more). A computation without clients runs with zero of them.

A worker that stops answering ends the call with :class:`workers.WorkerLost` naming it
(TFF's own contexts would retry forever); a computation that cannot take the mergeable
form raises :class:`NotMergeable` naming the run's method and aggregator and why.
"""

import asyncio
import contextlib
import functools
import itertools
import re
from typing import Iterator, Optional, Sequence

import grpc

from tff_noisy import errors
from tff_noisy import workers as workers_lib
from tff_noisy.tff_runtime import import_tff

tff = import_tff()
# pylint: disable=g-import-not-at-top,g-bad-import-order
from tensorflow_federated.python.core.impl.execution_contexts import (
    mergeable_comp_execution_context as tff_mergeable)
# pylint: enable=g-import-not-at-top,g-bad-import-order
# As TFF's own local runtime: messages up to 2 GB (a model, a client's dataset).
_MAX_MESSAGE_BYTES = 2 * 1000 * 1000 * 1000
_GRPC_OPTIONS = [('grpc.max_message_length', _MAX_MESSAGE_BYTES),
                 ('grpc.max_receive_message_length', _MAX_MESSAGE_BYTES),
                 ('grpc.max_send_message_length', _MAX_MESSAGE_BYTES)]
_REASON_CHARS = 200  # TFF's compiler errors go on to print whole computations.
_LOST_CHECK_SECONDS = 2.0  # After one worker failed: how long the others get to answer.
# Compilations, kept across contexts and runs: each worker's context compiles the same
# pieces, and the runs of a compare or grid the same computations (equal protos).
_mergeable_form = functools.lru_cache()(tff.backends.native.compile_to_mergeable_comp_form)
_native_form = functools.lru_cache()(tff.backends.native.desugar_and_transform_to_native)
# AsyncExecutionContext.invoke without its decorator, which retries forever on an
# unreachable worker.
_invoke_once = tff.framework.AsyncExecutionContext.invoke.__wrapped__


class NotMergeable(errors.UserError):
  """A computation of the run cannot be compiled to TFF's mergeable form."""


class _WorkerContext(tff.framework.AsyncExecutionContext):
  """One worker's context; a lost connection raises WorkerLost instead of retrying."""

  def __init__(self, address: str):
    stub = tff.framework.RemoteExecutorGrpcStub(workers_lib.channel(address, _GRPC_OPTIONS))

    def executor_fn(cardinalities):
      if cardinalities.get(tff.CLIENTS) is None:  # A computation without client values.
        cardinalities[tff.CLIENTS] = 0
      executor = tff.framework.RemoteExecutor(stub)
      executor.set_cardinalities(cardinalities)
      return executor

    super().__init__(tff.framework.ResourceManagingExecutorFactory(executor_fn),
                     compiler_fn=_native_form,
                     transform_args=tff.tensorflow.transform_args,
                     transform_result=tff.tensorflow.transform_result)
    self.address = address

  async def invoke(self, comp, arg):
    try:
      return await _invoke_once(self, comp, arg)
    except tff.framework.RetryableError as e:  # gRPC UNAVAILABLE or FAILED_PRECONDITION.
      reason = e.details() if isinstance(e, grpc.Call) else str(e)
      raise workers_lib.WorkerLost([self.address], reason) from None


class _SplitContext(tff.framework.MergeableCompExecutionContext):
  """Splits each call's clients across the workers; names every lost worker."""

  def __init__(self, addresses: Sequence[str], what: str):
    self._addresses = list(addresses)

    def compile_or_explain(comp):
      try:
        return _mergeable_form(comp)
      except Exception as e:  # pylint: disable=broad-except
        # Any failure of this pure transformation means the form cannot be reached.
        reason = re.split(r'(?<=\.)\s', str(e).strip(), maxsplit=1)[0][:_REASON_CHARS]
        raise NotMergeable(
            f'--workers: {what} cannot run on remote workers: TFF splits a computation '
            'across workers at its aggregations, which must not depend on one another '
            f'(one round of aggregation), and this one cannot be split '
            f'({type(e).__name__}: {reason}); run it without --workers') from None

    super().__init__([_WorkerContext(a) for a in addresses], compiler_fn=compile_or_explain)

  def invoke(self, comp, arg=None):
    try:
      return super().invoke(comp, arg)
    except workers_lib.WorkerLost as lost:
      silent = workers_lib.unanswered(self._addresses, _LOST_CHECK_SECONDS)
      named = [a for a in self._addresses if a in silent or a in lost.workers]
      raise workers_lib.WorkerLost(named, lost.reason) from None


async def _after_merge_in_group_order(comp, merge_result, arg_list, execution_contexts):
  """TFF's ``after_merge`` step over the client groups, results in the groups' order.

  TFF 0.87 (``_invoke_after_merge_in_async_pool``) concatenates the groups' CLIENTS-placed
  results in the order the workers finish, which would give one client's new state (and
  result) to another; here they keep the order of the clients in the call.
  """
  return list(await asyncio.gather(*(
      tff_mergeable._compute_after_merged(comp, arg, merge_result, context)  # pylint: disable=protected-access
      for arg, context in zip(arg_list, itertools.cycle(execution_contexts)))))


@contextlib.contextmanager
def on_workers(addresses: Optional[Sequence[str]], what: str) -> Iterator[dict]:
  """Runs the TFF computations of the ``with`` block on ``addresses`` (None: locally).

  Checks first that every worker answers (``workers.WorkersError`` names those that do
  not). ``what`` names the run's method and aggregator in a ``NotMergeable`` error.
  Yields the runtime record results.json keeps: ``{'workers': [...]}``, or ``{}``.
  """
  if not addresses:
    yield {}
    return
  workers_lib.check_workers(addresses)
  unordered = tff_mergeable._invoke_after_merge_in_async_pool  # pylint: disable=protected-access
  tff_mergeable._invoke_after_merge_in_async_pool = _after_merge_in_group_order
  try:
    with tff.framework.get_context_stack().install(_SplitContext(addresses, what)):
      yield {'workers': list(addresses)}
  finally:
    tff_mergeable._invoke_after_merge_in_async_pool = unordered
