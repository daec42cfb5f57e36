"""ResNet-18 and ResNet-34 in their CIFAR form (He et al., CVPR 2016; Table 1's basic-block
stages): the models MaskedOptim, FedEFC and LSC train on CIFAR-10/100.

The CIFAR variant the papers' code uses (kuangliu's pytorch-cifar lineage): a 3x3
stride-1 stem of 64 filters with a norm and ReLU and no max-pool, then four stages of
basic blocks (two 3x3 convs each) of 64, 128, 256 and 512 filters with strides 1, 2, 2,
2 (ResNet-18: 2, 2, 2, 2 blocks; ResNet-34: 3, 4, 6, 3), a 1x1 projection shortcut with
a norm where the shape changes, global average pooling and a Dense head. Convs have no
bias (the norm's offset replaces it). ``norm: batch`` as the papers (BatchNorm's moving
statistics are aggregated with the rest of the model), or ``group`` (32 groups).
ResNet-18 on 32x32x3 with 10 classes has 11,173,962 parameters.
"""

import tensorflow as tf

from models import layers as layers_lib

REQUIRES = 'an image (height, width, channels) of at least 8x8 (three stride-2 stages)'
BLOCKS = {18: (2, 2, 2, 2), 34: (3, 4, 6, 3)}
_FILTERS = (64, 128, 256, 512)
_GROUPS = 32  # GroupNorm's default group count (Wu & He, 2018).


def fits(input_shape: tuple) -> bool:
  return len(input_shape) == 3 and min(input_shape[:2]) >= 8


def build_resnet(depth: int, input_shape: tuple, num_classes: int,
                 norm: str = 'batch') -> tf.keras.Model:
  """The CIFAR ResNet of ``depth`` (18 or 34) described in the module docstring."""
  layers = tf.keras.layers

  def conv_norm(x, filters, size, stride):
    x = layers.Conv2D(filters, size, strides=stride, padding='same', use_bias=False)(x)
    return layers_lib.normalization(norm, _GROUPS)(x)

  inputs = tf.keras.Input(shape=input_shape)
  x = layers.ReLU()(conv_norm(inputs, 64, 3, 1))
  for stage, (filters, blocks) in enumerate(zip(_FILTERS, BLOCKS[depth])):
    for block in range(blocks):
      stride = 2 if stage > 0 and block == 0 else 1
      y = layers.ReLU()(conv_norm(x, filters, 3, stride))
      y = conv_norm(y, filters, 3, 1)
      shortcut = x
      if stride != 1 or x.shape[-1] != filters:
        shortcut = conv_norm(x, filters, 1, stride)
      x = layers.ReLU()(layers.Add()([shortcut, y]))
  x = layers.GlobalAveragePooling2D()(x)
  logits = layers.Dense(num_classes, name='logits')(x)
  return tf.keras.Model(inputs, logits, name=f'resnet{depth}_{norm}')
