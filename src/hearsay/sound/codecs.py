"""Codec round-trips with the real ffmpeg: MP3, Opus, AAC, AMR-NB (8 kHz), mu-law (8 kHz).

    from hearsay.sound.codecs import available, roundtrip
    have, missing = available()                    # encoders this ffmpeg has / lacks
    copies = roundtrip(x, have, tmp_dir)           # {codec: (N,) float32 @ 16 kHz, decoded back}

One ffmpeg process encodes a clip into every codec at once (one input, several outputs); each
output is decoded back through `hearsay.sound.audio.load_audio` (the same decoder everything else
uses),
so a copy is what a codec-damaged clip looks like to the model. The caller re-trims it. An encoder
this ffmpeg lacks is reported by `available()` and skipped by the caller, never faked.
"""

from __future__ import annotations

import functools
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from hearsay.sound.decoder import SAMPLE_RATE, AudioError, ffmpeg_exe, load_audio


@dataclass(frozen=True)
class Codec:
    encoder: str  # ffmpeg encoder name (`ffmpeg -encoders`)
    args: tuple[str, ...]  # output options: bitrate, rate, channels
    ext: str  # container the output is written in


CODECS: dict[str, Codec] = {
    "mp3": Codec("libmp3lame", ("-b:a", "32k"), "mp3"),
    "opus": Codec("libopus", ("-b:a", "16k"), "ogg"),
    "aac": Codec("aac", ("-b:a", "32k"), "m4a"),
    "amrnb": Codec("libopencore_amrnb", ("-ar", "8000", "-ac", "1", "-b:a", "12.2k"), "amr"),
    "mulaw": Codec("pcm_mulaw", ("-ar", "8000", "-ac", "1"), "wav"),
}


@functools.lru_cache(maxsize=4)
def encoders(ffmpeg: str | None = None) -> frozenset[str]:
    """Encoder names listed by `ffmpeg -encoders` (empty when ffmpeg cannot run)."""
    try:
        proc = subprocess.run([ffmpeg or ffmpeg_exe(), "-hide_banner", "-encoders"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError, AudioError):
        return frozenset()
    names = set()
    for line in proc.stdout.splitlines():
        parts = line.split()
        # rows look like " A....D libmp3lame  libmp3lame MP3 …": flags, then the name
        if len(parts) >= 2 and len(parts[0]) == 6 and parts[0][0] in "AVS.":
            names.add(parts[1])
    return frozenset(names)


def available(wanted=tuple(CODECS), ffmpeg: str | None = None) -> tuple[list[str], list[str]]:
    """(codecs whose encoder this ffmpeg has, codecs it lacks), both in `wanted` order."""
    unknown = [c for c in wanted if c not in CODECS]
    if unknown:
        raise ValueError(f"unknown codec(s) {unknown}; known: {list(CODECS)}")
    have = encoders(ffmpeg or ffmpeg_exe())  # cache keyed by the binary actually used
    return ([c for c in wanted if CODECS[c].encoder in have],
            [c for c in wanted if CODECS[c].encoder not in have])


def roundtrip(x: np.ndarray, codecs: list[str], tmp: Path) -> dict[str, np.ndarray]:
    """Encode the 16 kHz wave `x` into every codec in `codecs` with one ffmpeg run, decode each
    back with load_audio. Returns {codec: (N,) float32 @ 16 kHz}; raises AudioError on failure."""
    if not codecs:
        return {}
    tmp.mkdir(parents=True, exist_ok=True)
    src = tmp / "src.wav"
    sf.write(src, x, SAMPLE_RATE, subtype="FLOAT")
    cmd = [ffmpeg_exe(), "-nostdin", "-v", "error", "-y", "-i", str(src)]
    outs = {}
    for name in codecs:
        c = CODECS[name]
        outs[name] = tmp / f"enc_{name}.{c.ext}"
        cmd += ["-map", "0:a", "-c:a", c.encoder, *c.args, str(outs[name])]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        raise AudioError(src, f"codec encode failed ({why})")
    return {name: load_audio(path) for name, path in outs.items()}
