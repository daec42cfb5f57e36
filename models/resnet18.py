"""ResNet-18, CIFAR form (``resnet_cifar``): MaskedOptim's, FedEFC's and LSC's model."""

from models import resnet_cifar

REQUIRES = resnet_cifar.REQUIRES
fits = resnet_cifar.fits


def build(input_shape: tuple, num_classes: int, *, norm: str):
  """ResNet-18 (2, 2, 2, 2 basic blocks); ``norm='batch'`` as the papers, or ``'group'``."""
  return resnet_cifar.build_resnet(18, input_shape, num_classes, norm)
