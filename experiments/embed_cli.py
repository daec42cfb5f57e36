"""``tff-noisy embed``: offline NNC encoders.

  tff-noisy embed pretrain --dataset NAME [--subset N] [--epochs E] [--minutes M] --out DIR
  tff-noisy embed evaluate --dataset NAME --encoder pca|DIR [--subset N]
  tff-noisy embed measure CONFIG.yaml [--set ...] [--encoders E,..] [--seeds 0,1,2] [--out F]

``pretrain`` trains a SimCLR encoder (Chen et al. 2020) on the training inputs, no
labels, and saves it as a SavedModel for FedLN's ``encoder`` param. ``evaluate`` prints
the leave-one-out 10-NN accuracy against the true labels of raw pixels, PCA-50 and the
encoder, on the same seeded class-balanced subset. ``measure`` builds a config's
clients (one build per seed) and prints, per encoder, 10-NN accuracy against the true
labels, NNC's vote on the noisy labels and LSC's in-batch neighbour purity
(``simulation.encoder_measure``); ``--out`` writes every row as JSON. Its default encoders are
the label-free ones; the control ``control_supervised`` runs only where named.
"""

import json
import sys
import time

_NO_FLIP = ('digits', 'mnist')  # Mirrored digits are other symbols.


def _images(args):
  """The training images (and true labels) of ``args.dataset``, subset if asked."""
  from tff_noisy.data import federated, sources  # pylint: disable=g-import-not-at-top
  dataset = sources.load_dataset(args.dataset, args.data_dir)
  if len(dataset.input_shape) != 3:
    raise sources.DatasetError(f'{args.dataset}: embed needs images, got inputs of shape '
                               f'{dataset.input_shape}')
  x, y = dataset.x_train, dataset.y_train
  if args.subset is not None:
    try:
      index = federated.class_balanced_subset(y, args.subset, dataset.num_classes,
                                              args.seed, args.dataset)
    except ValueError as e:
      raise sources.DatasetError(f'--subset: {e}') from e
    x, y = x[index], y[index]
  return x, y


def _cmd_pretrain(args) -> None:
  from tff_noisy.embeddings import pretrain  # pylint: disable=g-import-not-at-top
  x, _ = _images(args)
  minutes = 15.0 if args.minutes is None and args.epochs is None else args.minutes
  start = time.monotonic()
  encoder = pretrain.pretrain(x, flip=args.dataset not in _NO_FLIP, epochs=args.epochs,
                              minutes=minutes, seed=args.seed)
  seconds = time.monotonic() - start
  pretrain.save_encoder(encoder, args.out, x.shape[1:])
  print(f'SimCLR encoder of {len(x)} {args.dataset} images, {seconds:.0f} s -> {args.out}')


def _cmd_evaluate(args) -> None:
  # pylint: disable=g-import-not-at-top
  from tff_noisy.embeddings import hub as hub_lib
  from tff_noisy.embeddings import pca as pca_lib
  from tff_noisy.ops import knn
  x, y = _images(args)
  rows = [('raw pixels', x.reshape(len(x), -1)),
          ('PCA-50', pca_lib.PCAEncoder.fit(x, n_components=50, seed=args.seed).embed(x)),
          ('sqrt-PCA-50',
           pca_lib.PCAEncoder.fit(x, n_components=50, seed=args.seed, sqrt=True).embed(x))]
  if args.encoder != 'pca':
    try:
      encoder = hub_lib.HubEncoder(args.encoder)
    except hub_lib.EncoderLoadError as e:
      print(f'tff-noisy: error: {e}', file=sys.stderr)
      sys.exit(2)
    rows.append((args.encoder, encoder.embed(x)))
  print(f'leave-one-out 10-NN accuracy, {len(x)} {args.dataset} training images '
        f'(seed {args.seed}):')
  width = max(len(name) for name, _ in rows)
  for name, embeddings in rows:
    print(f'  {name:<{width}}  {knn.knn_accuracy(embeddings, y, k=10):.4f}')


LABEL_FREE = 'pca,random,efficientnet_lite0'  # ``measure``'s default: no control.


def _cmd_measure(args) -> None:
  # pylint: disable=g-import-not-at-top
  from tff_noisy import config as config_lib
  from tff_noisy import validation
  from tff_noisy.data import federated
  from tff_noisy.simulation import encoder_measure as measure
  names = [n.strip() for n in args.encoders.split(',') if n.strip()]
  try:
    seeds = [int(s) for s in args.seeds.split(',')]
  except ValueError:
    raise config_lib.ConfigError(f'--seeds: expected comma-separated integers, e.g. 0,1,2; '
                                 f'got {args.seeds!r}') from None
  configs = [config_lib.load(args.config, args.set + [f'seed={seed}']) for seed in seeds]
  for config in configs:  # Every bad field before any work.
    validation.validate_experiment(config)
    for name in names:
      measure.encoder_params(config, name).check(config.fl.rounds)
  rows = []
  for config in configs:
    data = federated.build_federated_data(config, checked=True)
    for name in names:
      rows.append(measure.measure(config, data, name))
      print(f'seed {config.seed} {name}: 10-NN {rows[-1]["knn_accuracy"]:.4f} '
            f'({rows[-1]["embed_seconds"]} s to embed)', file=sys.stderr, flush=True)
  chosen = measure.settings(configs[0])
  clients = sum(len(y) for y in data.y.values())
  print(f'{args.config}: {len(data.client_ids)} clients, {clients} examples '
        f'({data.dataset_name}); NNC k={chosen["nnc_k"]}, LSC K={chosen["lsc_k"]} in '
        f'batches of {chosen["lsc_batch_size"]}; seeds {args.seeds}; %, mean ± std over seeds')
  print(measure.table(rows))
  if args.out:
    with open(args.out, 'w') as f:
      json.dump({'config': args.config, 'set': args.set, 'rows': rows}, f, indent=1)
      f.write('\n')


def add_embed_command(subparsers) -> None:
  """Registers ``embed pretrain`` and ``embed evaluate`` on an argparse subparsers."""
  embed = subparsers.add_parser('embed', help='offline NNC encoders (SimCLR, PCA)')
  embed_sub = embed.add_subparsers(dest='embed_command', required=True)

  def with_data(p):
    p.add_argument('--dataset', required=True, help='an image dataset, e.g. fashion_mnist')
    p.add_argument('--data-dir', help='where to look for the dataset first')
    p.add_argument('--subset', type=int, help='seeded class-balanced subset size')
    p.add_argument('--seed', type=int, default=0, help='seed of the subset and training')
    return p

  pretrain = with_data(embed_sub.add_parser(
      'pretrain', help='SimCLR on the training inputs, saved as a SavedModel'))
  pretrain.add_argument('--epochs', type=int, help='stop after this many epochs')
  pretrain.add_argument('--minutes', type=float,
                        help='stop after this much wall time (default: 15 if no --epochs)')
  pretrain.add_argument('--out', required=True, help='SavedModel directory to write')
  pretrain.set_defaults(func=_cmd_pretrain)

  evaluate = with_data(embed_sub.add_parser(
      'evaluate', help='leave-one-out 10-NN accuracy of raw pixels, PCA-50, sqrt-PCA-50 and '
      'an encoder'))
  evaluate.add_argument('--encoder', required=True,
                        help="'pca' or a SavedModel directory / TF-Hub handle")
  evaluate.set_defaults(func=_cmd_evaluate)

  measuring = embed_sub.add_parser(
      'measure', help="encoders' 10-NN accuracy, NNC vote and LSC purity on a config's clients")
  measuring.add_argument('config', help='experiment YAML (see experiments/configs/)')
  measuring.add_argument('--set', action='append', default=[], metavar='KEY=VALUE',
                         help='override a config value, e.g. --set noise.rho=0.7')
  measuring.add_argument('--encoders', default=LABEL_FREE,
                         help=f'comma-separated encoders (default: {LABEL_FREE}); '
                         "'control_supervised' (sees clean labels) only where named; a "
                         'SavedModel directory (embed pretrain) also works')
  measuring.add_argument('--seeds', default='0', help='comma-separated data seeds')
  measuring.add_argument('--out', help='write every row as JSON here')
  measuring.set_defaults(func=_cmd_measure)
