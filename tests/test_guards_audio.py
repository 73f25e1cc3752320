"""hearsay.sound.audio guards: trimming removes real room noise, not only digital zeros."""

import numpy as np
import pytest
from signals import speech_like, with_room_noise

from hearsay.sound import audio

SR = audio.SAMPLE_RATE


@pytest.mark.parametrize("lead_s,tail_s", [(1.0, 0.8), (0.3, 2.0)])
def test_trim_silence_removes_room_noise_55_db_down_around_speech(lead_s, tail_s):
    rng = np.random.default_rng(3)
    speech = speech_like(1.5, rng)
    x = with_room_noise(speech, lead_s, tail_s, 55.0, rng)
    start, end = audio.trim_silence(x)
    s0, s1 = int(lead_s * SR), int(lead_s * SR) + len(speech)
    tol = 0.03 * SR  # 30 ms: one 25 ms frame plus the 10 ms fade
    assert abs(start - s0) <= tol and abs(end - s1) <= tol, (start / SR, end / SR)
    # the front end's model input is then the speech alone (band-limit and normalise keep length)
    assert len(audio.prepare(x, max_s=None)) == end - start
