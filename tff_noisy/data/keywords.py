"""An offline keyword-spotting set spoken by espeak-ng, and 16 kHz audio loading.

``synthesise`` says each keyword with every voice (accent + variant), speed and
pitch, trims the silence espeak-ng adds, places the word at a random offset in a
1 s clip, scales it to a random peak level and adds white, pink or brown noise
at a random SNR. espeak-ng is deterministic and the augmentation draws from one
seeded numpy generator in a fixed order, so a seed gives identical arrays.

The split is by voice, as Speech Commands splits by speaker: by default the four
"diagonal" voices (accent i with variant i) are test voices, so every accent and
every variant is heard in training but no test voice is. Defaults give 144 clips
per word (108 train, 36 test), 1,440 in all.

Clips are float32 in [-1, 1]; ``write`` stores them as 16-bit PCM (like
Speech Commands) in a compressed .npz, ``read`` returns that PCM.

Audio at another sample rate (espeak-ng speaks at 22,050 Hz, phones record at
44.1 or 48 kHz) is brought to the models' 16 kHz by ``resample_to_16k``, which
``read_wav`` applies to every WAV file it reads.
"""

import io
import json
import math
import numbers
import os
import shutil
import subprocess
import sys
import wave
from concurrent import futures

import numpy as np
from scipy import signal

from tff_noisy.data import audio

SAMPLE_RATE = audio.SAMPLE_RATE
CLIP_SAMPLES = audio.CLIP_SAMPLES
FILENAME = 'keywords-v1.npz'  # Bump the version whenever the output changes.
WORDS = ('yes', 'no', 'up', 'down', 'left', 'right', 'on', 'off', 'stop', 'go')
_ACCENTS = ('en', 'en-us', 'en-gb-scotland', 'en-029')
_VARIANTS = ('', '+f3', '+m3', '+f2')
VOICES = tuple(a + v for a in _ACCENTS for v in _VARIANTS)
TEST_VOICES = tuple(a + v for a, v in zip(_ACCENTS, _VARIANTS))
SPEEDS = (130, 165, 200)  # Words per minute (espeak-ng -s).
PITCHES = (30, 50, 70)  # 0-99 (espeak-ng -p).
SNR_DB = (5.0, 30.0)  # Background noise SNR range, relative to the spoken word.
PEAK = (0.25, 0.9)  # Range of the word's peak amplitude.
_NOISE_EXPONENTS = (0.0, 1.0, 2.0)  # Power spectrum ~ 1/f^e: white, pink, brown.
_TRIM = 0.01  # Silence: below this fraction of the peak.


def espeak_available() -> bool:
  return shutil.which('espeak-ng') is not None


def resample_to_16k(waveform: np.ndarray, sample_rate: int) -> np.ndarray:
  """Resamples ``waveform`` (time on the last axis) from ``sample_rate`` Hz to 16 kHz.

  Polyphase filtering (``scipy.signal.resample_poly``) by 16000/gcd over
  rate/gcd; a 16 kHz input is returned unchanged (as float32).
  """
  if (isinstance(sample_rate, bool) or not isinstance(sample_rate, numbers.Integral)
      or sample_rate <= 0):
    raise ValueError(f'sample_rate must be a positive integer (Hz), got {sample_rate!r}')
  waveform = np.asarray(waveform, np.float32)
  if sample_rate == SAMPLE_RATE:
    return waveform
  g = math.gcd(SAMPLE_RATE, sample_rate)
  return signal.resample_poly(waveform, SAMPLE_RATE // g, sample_rate // g,
                              axis=-1).astype(np.float32)


def read_wav(source) -> np.ndarray:
  """A 16-bit PCM WAV file (path or file object) as a mono 16 kHz float32 waveform."""
  with wave.open(source, 'rb') as f:
    if f.getsampwidth() != 2:
      raise ValueError(f'{source}: expected 16-bit PCM, got {8 * f.getsampwidth()}-bit')
    rate, channels = f.getframerate(), f.getnchannels()
    pcm = np.frombuffer(f.readframes(f.getnframes()), '<i2')
  mono = pcm.reshape(-1, channels).mean(axis=1) / 32768.0
  return resample_to_16k(mono, rate)


def speak(word: str, voice: str, speed: int, pitch: int) -> np.ndarray:
  """espeak-ng saying ``word``, as a 16 kHz float32 waveform."""
  wav = subprocess.run(
      ['espeak-ng', '-v', voice, '-s', str(speed), '-p', str(pitch), '--stdout', word],
      check=True, capture_output=True).stdout
  # With --stdout the header's sizes are unknown; read_wav reads what is there.
  return read_wav(io.BytesIO(wav))


def _trim(waveform: np.ndarray) -> np.ndarray:
  loud = np.flatnonzero(np.abs(waveform) > _TRIM * np.abs(waveform).max())
  return waveform[loud[0]:loud[-1] + 1][:CLIP_SAMPLES]


def _noise(rng: np.random.Generator, exponent: float) -> np.ndarray:
  """Unit-RMS noise of CLIP_SAMPLES samples with power spectrum ~ 1/f^exponent."""
  spectrum = np.fft.rfft(rng.standard_normal(CLIP_SAMPLES))
  freqs = np.fft.rfftfreq(CLIP_SAMPLES)
  spectrum[1:] /= freqs[1:]**(exponent / 2)
  spectrum[0] = 0
  noise = np.fft.irfft(spectrum, CLIP_SAMPLES)
  return noise / np.sqrt(np.mean(noise**2))


def augment(word: np.ndarray, rng: np.random.Generator) -> np.ndarray:
  """Trimmed word at a random offset and peak level in 1 s of noise at a random SNR."""
  word = _trim(word)
  word = word * (rng.uniform(*PEAK) / np.abs(word).max())
  clip = np.zeros(CLIP_SAMPLES)
  offset = rng.integers(CLIP_SAMPLES - len(word) + 1)
  clip[offset:offset + len(word)] = word
  noise_rms = np.sqrt(np.mean(word**2)) * 10**(-rng.uniform(*SNR_DB) / 20)
  clip += noise_rms * _noise(rng, rng.choice(_NOISE_EXPONENTS))
  return np.clip(clip, -1, 1).astype(np.float32)


def synthesise(words=WORDS, voices=VOICES, test_voices=TEST_VOICES, speeds=SPEEDS,
               pitches=PITCHES, seed: int = 0, progress: bool = False) -> dict:
  """Every (word, voice, speed, pitch) once, augmented; test split = ``test_voices``.

  Returns float32 ``x_train``/``x_test`` [N, 16000] in [-1, 1], int64
  ``y_train``/``y_test`` (index into ``words``), ``class_names`` and ``meta``
  (the arguments, as JSON).
  """
  unknown = sorted(set(test_voices) - set(voices))
  if unknown:
    raise ValueError(f'test_voices not in voices: {", ".join(unknown)}')
  jobs = [(w, v, s, p) for w in words for v in voices for s in speeds for p in pitches]
  per_word = len(jobs) // len(words)
  rng = np.random.default_rng(seed)
  clips = []
  with futures.ThreadPoolExecutor(min(4, os.cpu_count() or 1)) as pool:
    for i, word in enumerate(pool.map(lambda job: speak(*job), jobs)):
      clips.append(augment(word, rng))
      if progress and (i + 1) % per_word == 0:
        print(f'keywords: {jobs[i][0]!r} done, {i + 1}/{len(jobs)} clips', file=sys.stderr,
              flush=True)
  labels = np.array([words.index(w) for w, *_ in jobs], np.int64)
  test = np.array([v in test_voices for _, v, *_ in jobs])
  x = np.stack(clips)
  meta = dict(words=list(words), voices=list(voices), test_voices=list(test_voices),
              speeds=list(speeds), pitches=list(pitches), seed=seed,
              snr_db=list(SNR_DB), peak=list(PEAK))
  return {
      'x_train': x[~test], 'y_train': labels[~test],
      'x_test': x[test], 'y_test': labels[test],
      'class_names': np.array(words), 'meta': np.array(json.dumps(meta)),
  }


def write(path: str, arrays: dict) -> None:
  """Writes ``synthesise``'s arrays as 16-bit PCM to a compressed .npz, atomically."""
  pcm = {k: np.round(v * 32767).astype(np.int16) if k.startswith('x_') else v
         for k, v in arrays.items()}
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  partial = f'{path}.{os.getpid()}.partial'
  with open(partial, 'wb') as f:
    np.savez_compressed(f, **pcm)
  os.replace(partial, path)


def read(path: str) -> dict:
  """The arrays of ``write``: int16 PCM x (divide by 32768), int64 y, class_names."""
  with np.load(path, allow_pickle=False) as f:
    return {key: f[key] for key in f.files}
