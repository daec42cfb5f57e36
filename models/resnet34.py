"""ResNet-34, CIFAR form (``resnet_cifar``): LSC's CIFAR-100 model."""

from models import resnet_cifar

REQUIRES = resnet_cifar.REQUIRES
fits = resnet_cifar.fits


def build(input_shape: tuple, num_classes: int, *, norm: str):
  """ResNet-34 (3, 4, 6, 3 basic blocks); ``norm='batch'`` as the papers, or ``'group'``."""
  return resnet_cifar.build_resnet(34, input_shape, num_classes, norm)
