"""`hearsay demo-data DIR`: write the SYNTHETIC two-class demo corpus + manifest.csv, made in code.

    hearsay demo-data demo_out/corpus          # ~150 clips of 1-6 s, a few seconds on one core

Nothing here is real speech and nothing here is a real deepfake. It exists so that every stage
(bundle, train, score, export, deploy) runs offline on something with the *shape* of the task:

* bona fide: a harmonic source with a drifting, jittered f0 (natural micro-variation), shaped by
  vowel-like formant resonators, syllable envelopes, a little breath noise;
* spoof, three generator families that leave different artefacts on the same kind of signal:
  `voc`   (vocoder-like buzz: flat f0, no jitter, impulse train; voc-b adds a 50 Hz frame ripple),
  `smear` (spectral smearing: magnitude blurred across frequency and 40 ms, phase randomised),
  `phq`   (phase quantised to a few levels) - the HOLDOUT family, only in holdout groups.
Both classes pass through the same channels (sources studio / phone / field), the same limiter
(every clip's crest factor drawn from one range: the buzz, the ripple and random phase would
otherwise raise it, and the peak of a normalised crop would tell the class), and get the same
random lengths, levels and silence padding, so duration, peak and leading silence are not shortcuts.

The manifest has inner groups (fold left empty: `hearsay splits make` fills it), holdout-family
groups, test groups (fold `test`), bona fide probe groups (fold `probe`: the probe set), extra rows
(train_scope `extra`, generators voc-x / smear-x and an extra bona fide source), a few stereo 48
kHz / 22.05 kHz FLAC / 8-bit / MP3 / M4A files, and with `bad_files` four deliberately bad ones: a
text file named .wav and a header-only .wav (decode failures), an all-silent clip and a 0.3 s clip
(dropped by the bundle as too short).

Exit codes: 0 written, 2 usage (also --seed or a count below its minimum, or --min-s not in
(0, --max-s]), 3 OUT cannot be written (the system's error named).
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr
from scipy import signal

from hearsay.sound.decoder import ffmpeg_exe

EXIT_OK, EXIT_USAGE, EXIT_UNWRITABLE = 0, 2, 3  # module docstring

SR = 16_000  # Hz, generation rate
VOWELS = [(730, 1090, 2440), (270, 2290, 3010), (300, 870, 2240), (530, 1840, 2480),
          (570, 840, 2410)]  # (F1, F2, F3) Hz
BANDWIDTHS = (80.0, 100.0, 150.0)  # formant bandwidths, Hz
SOURCES = ("studio", "phone", "field")
INNER_GENERATORS = ("voc-a", "voc-b", "smear-a", "smear-b")
HOLDOUT_GENERATORS = ("phq-a",)
EXTRA_GENERATORS = ("voc-x", "smear-x")
# Artefact strengths, set so that the demo's tiny model (a frozen random CNN front end) can see
# every inner generator: weaker ones (voc-b a harmonic source with a 0.3-deep 100 Hz ripple,
# smear widths 9 / 5 over one frame, smear-b phase only jittered) left voc-b / smear-b near chance.
VOC_B_RIPPLE, VOC_B_RATE = 0.9, 50.0  # voc-b's square amplitude ripple: depth (0..1), Hz
SMEAR_WIDTH = {"smear-a": 31, "smear-b": 41, "smear-x": 5}  # magnitude blur, STFT bins (31 Hz)
RANDOM_PHASE = ("smear-a", "smear-b")  # phase replaced outright; smear-x only jitters it
CREST_RANGE = (4.0, 5.5)  # peak / RMS every clip is limited to, drawn alike for both classes


@dataclass(frozen=True)
class DemoDataConfig:
    seed: int = 7  # everything (layout and audio) derives from this
    inner_groups: int = 15  # speaker groups that `splits make` spreads over folds 0-4
    per_group: int = 3  # clips per class per group
    holdout_groups: int = 3  # groups holding bona fide + the holdout family (phq)
    test_groups: int = 3  # groups pre-assigned fold `test`
    probe_groups: int = 2  # bona fide-only groups pre-assigned fold `probe` (the probe set)
    extra_rows: int = 12  # train_scope extra rows
    min_s: float = 1.0  # clip length range before padding, seconds
    max_s: float = 6.0
    bad_files: bool = True  # add the four deliberately bad files


HELP = {"seed": "everything (layout and audio) derives from this",
        "inner_groups": "speaker groups spread over folds 0-4",
        "per_group": "clips per class per group", "holdout_groups": "groups with the phq family",
        "test_groups": "groups pre-assigned fold test",
        "probe_groups": "bona fide groups pre-assigned fold probe (the probe set)",
        "extra_rows": "train_scope extra rows",
        "min_s": "shortest clip before padding, s", "max_s": "longest clip before padding, s",
        "bad_files": "add the four deliberately bad files (true/false)"}


# --------------------------------------------------------------------------- synthesis


def _resonate(x: np.ndarray, formants, rng: np.random.Generator) -> np.ndarray:
    """Cascade of 2-pole resonators at `formants` (Hz), each jittered a few percent."""
    y = x.astype(np.float64)
    for f, bw in zip(formants, BANDWIDTHS, strict=True):
        f = f * (1 + 0.04 * rng.standard_normal())
        r = np.exp(-np.pi * bw / SR)
        y = signal.lfilter([1 - r], [1, -2 * r * np.cos(2 * np.pi * f / SR), r * r], y)
    return y


def _f0_track(n: int, base: float, natural: bool, rng: np.random.Generator) -> np.ndarray:
    """(n,) f0 in Hz: natural = intonation + low-passed jitter; else flat, semitone-quantised."""
    if not natural:
        semis = np.round(12 * np.log2(base * (1 + 0.1 * rng.standard_normal()) / 100))
        return np.full(n, 100 * 2 ** (semis / 12))
    t = np.arange(n) / SR
    jitter = signal.lfilter([0.02], [1, -0.98], rng.standard_normal(n))  # slow wander, ~1 %
    return base * (1 + 0.06 * np.sin(2 * np.pi * rng.uniform(2, 5) * t + rng.uniform(0, 6))
                   - 0.05 * t + jitter)


def _harmonic(f0: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Band-limited harmonic source with 1/k roll-off and a little shimmer."""
    phase = 2 * np.pi * np.cumsum(f0) / SR
    k = np.arange(1, int(7000 // f0.max()) + 1)  # harmonics below 7 kHz
    src = (np.sin(np.outer(phase, k)) / k).sum(axis=1)
    return src * (1 + 0.05 * signal.lfilter([0.05], [1, -0.95], rng.standard_normal(len(f0))))


def _impulses(f0: np.ndarray) -> np.ndarray:
    """A bare impulse train at f0: every harmonic equally loud (the vocoder buzz)."""
    cycles = np.floor(np.cumsum(f0) / SR)
    return np.diff(cycles, prepend=0.0) * 3.0


def _stft_mangle(x: np.ndarray, how: str, rng: np.random.Generator) -> np.ndarray:
    """STFT (512 / hop 128, Hann) -> alter magnitude or phase -> overlap-add."""
    _, _, z = signal.stft(x, SR, nperseg=512, noverlap=384)
    mag, ph = np.abs(z), np.angle(z)
    if how.startswith("smear"):
        width = SMEAR_WIDTH[how]
        mag = signal.convolve2d(mag, np.ones((width, 5)) / (width * 5), mode="same")
        ph = rng.uniform(-np.pi, np.pi, ph.shape) if how in RANDOM_PHASE else \
            ph + rng.uniform(-1.5, 1.5, ph.shape)
    elif how.startswith("phq"):
        ph = np.round(ph / (np.pi / 2)) * (np.pi / 2)  # 4 phase levels
    _, y = signal.istft(mag * np.exp(1j * ph), SR, nperseg=512, noverlap=384)
    return y[: len(x)]


def _utterance(seconds: float, generator: str, base_f0: float,
               rng: np.random.Generator) -> np.ndarray:
    """Syllables with gaps; the source depends on the generator (bonafide / voc-* / others)."""
    out: list[np.ndarray] = []
    total = int(seconds * SR)
    n_done = 0
    while n_done < total:
        n = int(rng.uniform(0.12, 0.3) * SR)
        natural = not generator.startswith("voc")
        f0 = _f0_track(n, base_f0, natural, rng)
        src = _impulses(f0) if generator in ("voc-a", "voc-b", "voc-x") else _harmonic(f0, rng)
        src = src + 0.02 * rng.standard_normal(n)  # breath / aspiration
        syl = _resonate(src, VOWELS[rng.integers(len(VOWELS))], rng) * np.hanning(n) ** 0.5
        gap = np.zeros(int(rng.uniform(0.03, 0.12) * SR))
        out += [syl, gap]
        n_done += n + len(gap)
    x = np.concatenate(out)[:total]
    if generator == "voc-b":  # the vocoder's 20 ms frames heard as a square amplitude ripple
        x = x * (1 + VOC_B_RIPPLE * np.sign(np.sin(2 * np.pi * VOC_B_RATE * np.arange(total) / SR)))
    if generator.startswith(("smear", "phq")):
        x = _stft_mangle(x, generator, rng)
    return x


def _channel(x: np.ndarray, source: str, rng: np.random.Generator) -> np.ndarray:
    """The recording channel, applied to both classes alike."""
    x = x / (np.max(np.abs(x)) + 1e-9)
    if source == "phone":
        sos = signal.butter(4, [300, 3400], btype="band", fs=SR, output="sos")
        x = signal.sosfilt(sos, x) + 10 ** (-45 / 20) * rng.standard_normal(len(x))
    elif source == "field":
        ir = rng.standard_normal(int(0.2 * SR)) * np.exp(-np.arange(int(0.2 * SR)) / (0.04 * SR))
        x = x + 0.3 * signal.fftconvolve(x, ir / np.abs(ir).sum(), mode="full")[: len(x)]
        x = x + 10 ** (-42 / 20) * rng.standard_normal(len(x))
    else:
        x = x + 10 ** (-60 / 20) * rng.standard_normal(len(x))
    return x


def _limit(x: np.ndarray, crest: float) -> np.ndarray:
    """Hard-limit `x` so that its crest factor (peak / RMS over the whole wave) is `crest`.

    Buzz, ripple and random-phase artefacts change a clip's natural crest factor (bona fide
    6-9, voc-b up to 12): without this the peak of a normalised crop would tell the class.
    Every clip's natural crest is above CREST_RANGE, so every clip is limited; the threshold is
    found by bisection (crest of the limited wave rises monotonically with the threshold)."""
    lo, hi = 0.0, float(np.max(np.abs(x)))
    for _ in range(30):  # relative precision 2**-30 of the peak
        t = (lo + hi) / 2
        y = np.clip(x, -t, t)
        lo, hi = (t, hi) if t / np.sqrt(np.mean(y * y)) < crest else (lo, t)
    return np.clip(x, -hi, hi)


def synth_clip(generator: str, source: str, seconds: float, base_f0: float,
               rng: np.random.Generator,
               level_rng: np.random.Generator | None = None) -> np.ndarray:
    """(N,) float32 @ 16 kHz: utterance -> channel -> limiter (crest factor) -> optional silence
    padding -> random level; the limiter, padding and level are drawn alike for both classes.

    `level_rng` (default `rng`) draws the padding and the level: write_corpus gives a bona fide
    clip and its synthetic partner the same one, so that even a small scope (the 18 test clips)
    cannot show a level difference by chance."""
    x = _channel(_utterance(seconds, generator, base_f0, rng), source, rng)
    x = _limit(x, rng.uniform(*CREST_RANGE))
    lr = rng if level_rng is None else level_rng
    if lr.random() < 0.4:  # silence padding (both classes alike), low noise floor
        lead, tail = (int(lr.uniform(0.05, 0.8) * SR) for _ in range(2))
        x = np.concatenate([1e-4 * rng.standard_normal(lead), x, 1e-4 * rng.standard_normal(tail)])
    peak_db = lr.uniform(-18, -1)
    return (x / np.max(np.abs(x)) * 10 ** (peak_db / 20)).astype(np.float32)


# --------------------------------------------------------------------------- writing


def _write(x: np.ndarray, stem: Path, fmt: str) -> Path:
    """Write `x` (16 kHz) as `fmt`: wav, stereo48 (wav), flac22, u8 (wav), mp3, m4a."""
    if fmt == "stereo48":
        y = soxr.resample(x, SR, 48_000)
        path = stem.with_suffix(".wav")
        sf.write(path, np.stack([y, 0.9 * y], axis=1), 48_000, subtype="PCM_16")
    elif fmt == "flac22":
        path = stem.with_suffix(".flac")
        sf.write(path, soxr.resample(x, SR, 22_050), 22_050, subtype="PCM_16")
    elif fmt == "u8":
        path = stem.with_suffix(".wav")
        sf.write(path, x, SR, subtype="PCM_U8")
    elif fmt in ("mp3", "m4a"):
        tmp = stem.with_suffix(".tmp.wav")
        sf.write(tmp, x, SR, subtype="PCM_16")
        path = stem.with_suffix("." + fmt)
        codec = ["-c:a", "libmp3lame", "-b:a", "64k"] if fmt == "mp3" else ["-c:a", "aac"]
        subprocess.run([ffmpeg_exe(), "-nostdin", "-v", "error", "-y", "-i", str(tmp), *codec,
                        str(path)], check=True, capture_output=True)
        tmp.unlink()
    else:
        path = stem.with_suffix(".wav")
        sf.write(path, x, SR, subtype="PCM_16")
    return path


def layout(cfg: DemoDataConfig) -> list[dict]:
    """The corpus rows (no audio yet): id, label, generator, source, group, fold, scope, seconds."""
    rng = np.random.default_rng([cfg.seed, 0])
    rows: list[dict] = []

    def add(group: str, label: str, gen: str, fold: str = "", scope: str = "core") -> None:
        rows.append({"id": f"{group}-{len(rows):04d}", "label": label, "generator": gen,
                     "source": SOURCES[rng.integers(3)], "group": group, "fold": fold,
                     "train_scope": scope, "seconds": float(rng.uniform(cfg.min_s, cfg.max_s)),
                     "fmt": rng.choice(["wav"] * 14 + ["stereo48", "flac22", "u8", "mp3", "m4a"])})

    for g in range(cfg.inner_groups):
        for _ in range(cfg.per_group):
            add(f"spk{g:02d}", "bonafide", "bonafide")
            add(f"spk{g:02d}", "spoof", INNER_GENERATORS[rng.integers(len(INNER_GENERATORS))])
    for g in range(cfg.holdout_groups):
        for _ in range(cfg.per_group):
            add(f"hold{g:02d}", "bonafide", "bonafide")
            add(f"hold{g:02d}", "spoof", HOLDOUT_GENERATORS[0])
    gens = INNER_GENERATORS + HOLDOUT_GENERATORS
    for g in range(cfg.test_groups):
        for _ in range(cfg.per_group):
            add(f"test{g:02d}", "bonafide", "bonafide", fold="test")
            add(f"test{g:02d}", "spoof", gens[rng.integers(len(gens))], fold="test")
    for i in range(cfg.extra_rows):
        # half share an inner speaker group (they inherit its fold), half are extra-only groups
        group = f"spk{i % cfg.inner_groups:02d}" if i % 2 else f"xtra{i // 4:02d}"
        if i % 3 == 0:
            add(group, "bonafide", "bonafide", scope="extra")
            rows[-1]["source"] = "audiobook"  # an extra-only bona fide source
        else:
            add(group, "spoof", EXTRA_GENERATORS[i % 2], scope="extra")
    for g in range(cfg.probe_groups):  # last, so the rows above draw as before
        for _ in range(cfg.per_group):
            add(f"probe{g:02d}", "bonafide", "bonafide", fold="probe")
    return rows


MANIFEST_COLUMNS = ["id", "path", "label", "generator", "source", "group", "fold", "train_scope"]
EXT = {"wav": ".wav", "stereo48": ".wav", "u8": ".wav", "flac22": ".flac", "mp3": ".mp3",
       "m4a": ".m4a"}
BAD = [  # (id, label, generator, what the file is)
    ("bad-text", "bonafide", "bonafide", "a text file named .wav (undecodable)"),
    ("bad-header", "spoof", "voc-a", "a WAV header cut before its data chunk (undecodable)"),
    ("bad-silent", "bonafide", "bonafide", "2 s of digital silence (dropped: nothing left)"),
    ("bad-short", "spoof", "smear-a", "0.3 s tone in silence (dropped: < 0.5 s after trim)"),
]


def manifest_rows(cfg: DemoDataConfig = DemoDataConfig()) -> list[dict]:
    """The manifest (no audio needed): what write_corpus writes to manifest.csv, in order."""
    rows = [{**{k: r[k] for k in MANIFEST_COLUMNS if k != "path"},
             "path": f"audio/{r['id']}{EXT[r['fmt']]}"} for r in layout(cfg)]
    if cfg.bad_files:
        rng = np.random.default_rng([cfg.seed, 3])
        for rid, label, gen, _ in BAD:
            rows.append({"id": rid, "path": f"audio/{rid}.wav", "label": label, "generator": gen,
                         "source": "studio", "group": f"spk{rng.integers(cfg.inner_groups):02d}",
                         "fold": "", "train_scope": "core"})
    return [{k: r[k] for k in MANIFEST_COLUMNS} for r in rows]


def write_corpus(out: Path, cfg: DemoDataConfig = DemoDataConfig()) -> Path:
    """Synthesise every clip into out/audio/, write out/manifest.csv; returns the manifest path."""
    audio_dir = out / "audio"
    audio_dir.mkdir(parents=True, exist_ok=True)
    rows = layout(cfg)
    base_f0 = {g: np.random.default_rng([cfg.seed, 1, i]).uniform(90, 220)
               for i, g in enumerate(sorted({r["group"] for r in rows}))}
    for i, row in enumerate(rows):
        rng = np.random.default_rng([cfg.seed, 2, i])
        pair = np.random.default_rng([cfg.seed, 4, i // 2])  # rows 2k, 2k+1: bona fide + synthetic
        x = synth_clip(row["generator"], row["source"], row["seconds"], base_f0[row["group"]], rng,
                       level_rng=pair)
        _write(x, audio_dir / row["id"], row["fmt"])
    if cfg.bad_files:
        _write_bad_files(audio_dir)
    manifest = manifest_rows(cfg)
    missing = [r["path"] for r in manifest if not (out / r["path"]).is_file()]
    assert not missing, f"demo corpus writer and manifest disagree: {missing[:3]}"
    with open(out / "manifest.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=MANIFEST_COLUMNS)
        w.writeheader()
        w.writerows(manifest)
    (out / "README.txt").write_text(
        "SYNTHETIC demo corpus written by `hearsay demo-data` (hearsay.demo.corpus).\n"
        "No real speech, no real deepfakes: harmonic 'speech-like' signals (bona fide) and three\n"
        "families of artificial artefacts (spoof). Deliberately bad files:\n"
        + "".join(f"  audio/{rid}.wav: {what}\n" for rid, _, _, what in BAD)
        + f"Config: {asdict(cfg)!r}\n")
    return out / "manifest.csv"


def _write_bad_files(a: Path) -> None:
    """Two undecodable files and two that decode but leave < 0.5 s after trimming."""
    (a / "bad-text.wav").write_text("this is a text file, not audio\n")
    (a / "bad-header.wav").write_bytes(b"RIFF\x24\x00\x00\x00WAVEfmt ")  # header only, cut
    sf.write(a / "bad-silent.wav", np.zeros(2 * SR, np.float32), SR, subtype="PCM_16")
    t = np.arange(int(0.3 * SR)) / SR
    pad = np.zeros(SR // 2)
    short = np.concatenate([pad, 0.3 * np.sin(2 * np.pi * 220 * t), pad])
    sf.write(a / "bad-short.wav", short.astype(np.float32), SR, subtype="PCM_16")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="hearsay demo-data", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path, help="output folder (audio/ + manifest.csv)")
    for f in fields(DemoDataConfig):
        ap.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default)
                        if not isinstance(f.default, bool) else _bool, default=f.default,
                        help=f"{HELP[f.name]} (default {f.default})")
    args = ap.parse_args(argv)
    cfg = DemoDataConfig(**{f.name: getattr(args, f.name) for f in fields(DemoDataConfig)})
    if (why := config_problem(cfg)) is not None:
        ap.error(why)
    try:
        path = write_corpus(args.out, cfg)
    except OSError as err:
        print(f"hearsay demo-data: cannot write {args.out}: {err}", file=sys.stderr)
        return EXIT_UNWRITABLE
    print(f"demo-data: wrote {path} (SYNTHETIC corpus, see {args.out / 'README.txt'})")
    return EXIT_OK


def config_problem(cfg: DemoDataConfig) -> str | None:
    """What makes `cfg` no corpus (a sentence naming the option), or None."""
    least = {"seed": 0, "inner_groups": 1, "per_group": 1, "holdout_groups": 0, "test_groups": 0,
             "probe_groups": 0, "extra_rows": 0}
    for name, low in least.items():
        if getattr(cfg, name) < low:
            return f"--{name.replace('_', '-')} must be >= {low} (got {getattr(cfg, name)})"
    if not 0 < cfg.min_s <= cfg.max_s:
        return f"--min-s must lie in (0, --max-s] (got {cfg.min_s:g} and {cfg.max_s:g})"
    return None


def _bool(s: str) -> bool:
    if s.lower() in ("1", "true", "yes"):
        return True
    if s.lower() in ("0", "false", "no"):
        return False
    raise argparse.ArgumentTypeError(f"{s!r} is not a boolean (true/false)")
