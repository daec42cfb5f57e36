"""The audio format every audio source and model shares: 1 s mono clips at 16 kHz (as
Speech Commands)."""

SAMPLE_RATE = 16000  # Hz.
CLIP_SAMPLES = SAMPLE_RATE  # 1 s.
