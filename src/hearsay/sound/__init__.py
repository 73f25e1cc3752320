"""The sound floor: torch-free code that turns files into waves and waves into model inputs, shared
by the bundle builder, the trainer, the scorers and hearsay-score.

    audio      decode, trim, resample, prepare (the front end); one input file read as
               hearsay-score must (bounded decode); pad_batch, the one padding of the trainer's
               batches and every scorer's
    codecs     the codec copies (MP3, Opus, AAC, AMR-NB, mu-law) through ffmpeg
    windows    long recordings in windows (streamed decode)
    augment    the augmentation: AugmentConfig, choose (label-blind), the type names, and the
               numpy transforms: draw_<type>, render_<type>, apply
    example    one training example: crop length (CropConfig) -> choose -> load -> crop -> augment
               -> finish; the test-time input
"""
