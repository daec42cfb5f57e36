"""Synthesises the offline keyword-spotting set with espeak-ng (apt-get install espeak-ng).

  python scripts/make_keywords.py [--out DIR] [--seed N] [--words yes,no,...]

Writes DIR/keywords-v1.npz (default DIR: the cache, where the ``keywords`` dataset
looks for it); see tff_noisy/data/keywords.py for what is in it.
"""

import argparse
import os
import sys
import time

from tff_noisy.data import keywords
from tff_noisy.data import sources


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument('--out', default=os.path.join(sources.cache_root(), 'keywords'),
                      help='output directory (default: %(default)s)')
  parser.add_argument('--seed', type=int, default=0, help='noise and shift seed')
  parser.add_argument('--words', default=','.join(keywords.WORDS),
                      help='comma-separated keywords (default: %(default)s)')
  args = parser.parse_args()
  if not keywords.espeak_available():
    sys.exit('make_keywords: espeak-ng not found; apt-get install espeak-ng')
  started = time.time()
  arrays = keywords.synthesise(words=tuple(args.words.split(',')), seed=args.seed,
                               progress=True)
  path = os.path.join(args.out, keywords.FILENAME)
  keywords.write(path, arrays)
  print(f'{path}: {len(arrays["y_train"])} train, {len(arrays["y_test"])} test clips of '
        f'{len(arrays["class_names"])} words in {time.time() - started:.0f} s')


if __name__ == '__main__':
  main()
