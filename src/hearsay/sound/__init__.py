"""The sound floor: torch-free code that turns files into waves and waves into model inputs, shared
by the bundle builder, the trainer, the scorers and hearsay-score.

    audio      decode, trim, resample, prepare (the front end)
    codecs     the codec copies (MP3, Opus, AAC, AMR-NB, mu-law) through ffmpeg
    windows    long recordings in windows (streamed decode)
    crops      crop lengths, crop positions and padded batches
"""
