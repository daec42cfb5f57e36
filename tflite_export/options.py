"""The export options and their checks, importable without TensorFlow (checked first)."""

from typing import Optional

QUANTIZATIONS = ('none', 'float16', 'dynamic', 'int8')


def check_quantize(quantize: str) -> None:
  if quantize not in QUANTIZATIONS:
    raise ValueError(f'unknown quantize {quantize!r}; allowed: '
                     f'{", ".join(QUANTIZATIONS)}')


def check_options(quantize: str, representative_size: Optional[int] = 200,
                  integer_io: bool = False) -> None:
  """Raises ValueError unless ``convert.convert_keras`` accepts these options."""
  check_quantize(quantize)
  if quantize == 'int8':
    if not representative_size or representative_size < 1:
      raise ValueError('int8 quantisation needs representative_size >= 1, got '
                       f'{representative_size!r}')
  elif integer_io:
    raise ValueError(f'integer_io needs quantize=int8, got {quantize!r}')
