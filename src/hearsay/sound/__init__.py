"""The sound floor: torch-free code that turns files into waves and waves into model inputs, shared
by the bundle builder, the trainer, the scorers and hearsay-score.

    decoder    a file (or samples in memory) -> 16 kHz mono: load_audio (one shot), the
               streamed, bounded read of one input file as hearsay-score must (decode)
    audio      the front end's arithmetic: trim, cap, band-limit, normalise (prepare);
               pad_batch, the one padding of the trainer's batches and every scorer's
    codecs     the codec copies (MP3, Opus, AAC, AMR-NB, mu-law) through ffmpeg
    windows    long recordings cut in windows (over the decoder's streamed read)
    augment    the augmentation: AugmentConfig, choose (label-blind), the type names, and the
               numpy transforms: draw_<type>, render_<type>, apply
    example    one training example: crop length (CropConfig) -> choose -> load -> crop -> augment
               -> finish; the test-time input
"""
