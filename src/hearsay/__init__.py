"""hearsay: fine-tune XLS-R 300M into a speech-deepfake detector and ship it as a CPU scorer."""

__version__ = "0.1.0"
