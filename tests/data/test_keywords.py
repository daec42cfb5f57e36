"""The espeak-ng keyword set: synthesis, storage, the ``keywords`` source, 16 kHz audio."""

import functools
import shutil
import wave

import numpy as np
import pytest

from tff_noisy.data import keywords
from tff_noisy.data import sources

needs_espeak = pytest.mark.skipif(shutil.which('espeak-ng') is None,
                                  reason='espeak-ng not installed (apt-get install espeak-ng)')
# 2 words x 2 voices x 2 speeds: 4 train clips (voice en-us), 4 test clips (en-us+f3).
_TINY = dict(words=('yes', 'no'), voices=('en-us', 'en-us+f3'), test_voices=('en-us+f3',),
             speeds=(140, 190), pitches=(50,))


@pytest.fixture(scope='module')
def tiny():
  return keywords.synthesise(**_TINY, seed=0)


@needs_espeak
def test_synthesise_shapes_range_labels(tiny):
  for split in ('train', 'test'):
    x, y = tiny[f'x_{split}'], tiny[f'y_{split}']
    assert x.shape == (4, 16000) and x.dtype == np.float32
    assert -1 <= x.min() and x.max() <= 1
    assert np.all(np.abs(x).max(axis=1) > 0.2)  # A word is in every clip.
    np.testing.assert_array_equal(y, [0, 0, 1, 1])
    assert y.dtype == np.int64
  assert tiny['class_names'].tolist() == ['yes', 'no']
  assert not np.array_equal(tiny['x_train'][0], tiny['x_train'][1])


@needs_espeak
def test_synthesise_is_deterministic(tiny):
  again = keywords.synthesise(**_TINY, seed=0)
  for key, value in tiny.items():
    np.testing.assert_array_equal(again[key], value)
  other = keywords.synthesise(**_TINY, seed=1)
  assert not np.array_equal(other['x_train'], tiny['x_train'])


def test_test_voices_must_be_voices():
  with pytest.raises(ValueError, match='test_voices not in voices: en-gb'):
    keywords.synthesise(voices=('en-us',), test_voices=('en-gb',))


@needs_espeak
def test_write_read_and_load_from_data_dir(tiny, tmp_path, monkeypatch):
  monkeypatch.delenv(sources.DATA_ENV, raising=False)
  keywords.write(str(tmp_path / 'keywords' / keywords.FILENAME), tiny)
  stored = keywords.read(str(tmp_path / 'keywords' / keywords.FILENAME))
  assert stored['x_train'].dtype == np.int16
  ds = sources.load_dataset('keywords', data_dir=str(tmp_path))
  assert ds.x_train.shape == (4, 16000) and ds.x_test.shape == (4, 16000)
  assert ds.x_train.dtype == np.float32 and ds.y_train.dtype == np.int64
  np.testing.assert_allclose(ds.x_train, tiny['x_train'], atol=1e-4)
  assert ds.class_names == ['yes', 'no'] and ds.num_classes == 10
  assert ds.input_shape == (16000,)


@needs_espeak
def test_generated_into_the_cache_when_missing(tmp_path, monkeypatch, capsys):
  monkeypatch.delenv(sources.DATA_ENV, raising=False)
  monkeypatch.setenv(sources.CACHE_ENV, str(tmp_path))
  monkeypatch.setattr(keywords, 'synthesise', functools.partial(keywords.synthesise, **_TINY))
  ds = sources.load_dataset('keywords')
  assert (tmp_path / 'keywords' / keywords.FILENAME).is_file()
  assert ds.x_train.shape == (4, 16000)
  assert 'generating it with espeak-ng' in capsys.readouterr().err


def test_missing_without_espeak_says_how_to_get_it(tmp_path, monkeypatch):
  monkeypatch.delenv(sources.DATA_ENV, raising=False)
  monkeypatch.setenv(sources.CACHE_ENV, str(tmp_path))
  monkeypatch.setattr(keywords, 'espeak_available', lambda: False)
  (tmp_path / 'given').mkdir()
  with pytest.raises(sources.DatasetNotFoundError) as error:
    sources.load_dataset('keywords', data_dir=str(tmp_path / 'given'))
  message = str(error.value)
  for expected in [str(tmp_path / 'given' / 'keywords' / keywords.FILENAME),
                   str(tmp_path / 'keywords' / keywords.FILENAME),
                   'apt-get install espeak-ng', 'scripts/make_keywords.py']:
    assert expected in message, expected
  assert 'tfds' not in message


@pytest.mark.parametrize('rate', [8000, 22050, 44100])
def test_resample_to_16k_keeps_frequency_and_duration(rate):
  t = np.arange(rate) / rate  # 1 s.
  resampled = keywords.resample_to_16k(np.sin(2 * np.pi * 440 * t), rate)
  assert resampled.shape == (16000,) and resampled.dtype == np.float32
  assert np.argmax(np.abs(np.fft.rfft(resampled))) == 440  # 1 Hz bins.
  expected = np.sin(2 * np.pi * 440 * np.arange(16000) / 16000)
  np.testing.assert_allclose(resampled[500:-500], expected[500:-500], atol=0.01)


def test_resample_to_16k_batches_and_identity():
  x = np.random.default_rng(0).standard_normal((3, 8000))
  assert keywords.resample_to_16k(x, 8000).shape == (3, 16000)
  np.testing.assert_array_equal(keywords.resample_to_16k(x, 16000), x.astype(np.float32))


@pytest.mark.parametrize('rate', [0, -8000, 8000.5, True, None])
def test_resample_to_16k_rejects_bad_rates(rate):
  with pytest.raises(ValueError, match='sample_rate must be a positive integer'):
    keywords.resample_to_16k(np.zeros(10), rate)


def test_read_wav_stereo_44k(tmp_path):
  t = np.arange(44100) / 44100
  left = np.round(16000 * np.sin(2 * np.pi * 1000 * t)).astype('<i2')
  with wave.open(str(tmp_path / 'a.wav'), 'wb') as f:
    f.setnchannels(2)
    f.setsampwidth(2)
    f.setframerate(44100)
    f.writeframes(np.stack([left, left], axis=1).tobytes())
  waveform = keywords.read_wav(str(tmp_path / 'a.wav'))
  assert waveform.shape == (16000,) and waveform.dtype == np.float32
  assert np.argmax(np.abs(np.fft.rfft(waveform))) == 1000
  assert abs(np.abs(waveform).max() - 16000 / 32768) < 0.01
