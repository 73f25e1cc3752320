"""hearsay-score, the torch-free CPU scorer of an exported model folder (docs/INTERFACES.md).

    from hearsay.deploy import Scorer
    scorer = Scorer("demo_out/export")              # checks the folder (ModelError) first
    row = scorer.score_file("call.m4a")              # the row hearsay-score writes, typed
    row = scorer.score_array(wave, 44_100)           # the same front end, from samples

The package: engine.py (a checked model folder and its onnxruntime session, the first-window
mode's scoring, score_folder, the decision and llr columns); api.py (Scorer, the Python API);
cli.py (`hearsay-score`, its --help); inputs.py (a folder walked, a file, a list of files, and
the run record --resume checks); io.py (CSV rows, signals, progress); jsonl.py (--format jsonl);
windowed.py (windowed scoring, the default); memory.py (an array as input); rowtypes.py (a
row's values as floats, ints and None: the API and jsonl); prepared.py (what prepared_logits
accepts); __main__.py (`python -m hearsay.deploy`). It imports numpy,
soundfile, onnxruntime and hearsay's torch-free sound, cpu_engine and contracts modules only --
never torch (the deploy image has none; tests/test_deploy.py proves it in a venv without torch).
"""

from __future__ import annotations

# The package's names, as callers use them (hearsay.deploy.main is the console script).
from hearsay.contracts.model_dir import (  # noqa: F401
    FRONT_END,
    INT8,
    ONNX,
    PORTABLE,
    ModelError,
    model_sums,
)
from hearsay.deploy import engine, inputs, io, windowed  # noqa: F401
from hearsay.deploy.api import Scorer  # noqa: F401
from hearsay.deploy.cli import (  # noqa: F401
    DEFAULT_MODEL_DIR,
    EXIT_CLOSED,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_MODEL,
    EXIT_NO_AUDIO,
    EXIT_OK,
    EXIT_OUTPUT,
    EXIT_USAGE,
    main,
)
from hearsay.deploy.engine import (  # noqa: F401
    MIN_SAMPLES,
    Engine,
    ScoreConfig,
    iter_chunks,
    load_engine,
    model_input,
    rows_of,
    score_chunk,
    score_folder,
    set_logit,
)
from hearsay.deploy.inputs import AUDIO_EXTS, find_audio  # noqa: F401
from hearsay.deploy.io import (  # noqa: F401
    COLUMNS,
    OutputError,
    Progress,
    ResumeError,
    RowSink,
    new_row,
    say,
)
from hearsay.sound import windows  # noqa: F401
