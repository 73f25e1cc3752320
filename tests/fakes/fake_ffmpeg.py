"""The real ffmpeg behind a wrapper that hides one encoder: a machine whose ffmpeg lacks it."""

from __future__ import annotations

from hearsay.sound import decoder


def fake_ffmpeg_without(tmp_path, encoder):
    """The real ffmpeg behind a wrapper whose `-encoders` listing lacks `encoder`."""
    real = decoder.ffmpeg_exe()
    p = tmp_path / "ffmpeg"
    p.write_text(f"#!/bin/sh\ncase \" $* \" in *' -encoders '*) \"{real}\" \"$@\" | "
                 f"grep -v ' {encoder} ';;\n*) exec \"{real}\" \"$@\";;\nesac\n")
    p.chmod(0o755)
    return str(p)
