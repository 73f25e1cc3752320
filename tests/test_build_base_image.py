"""container/build_base_image.sh: which Debian mirror debootstrap gets (no root, no network).

The mirror is $DEBIAN_MIRROR, else the first source of the machine's apt that serves
`deb URI bookworm main`; HEARSAY_APT_SOURCES points the script at fake sources files here.

    .venv/bin/pytest -q tests/test_build_base_image.py
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "container" / "build_base_image.sh"

SECURITY_822 = """\
Types: deb
# a comment line inside a stanza
URIs: http://security.example/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def print_mirror(sources: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "DEBIAN_MIRROR"}
    return subprocess.run([str(SCRIPT), "--print-mirror"], capture_output=True, text=True,
                          timeout=30, env={**base, "HEARSAY_APT_SOURCES": sources, **env})


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize(("name", "text"), [
    ("sources.list", "deb http://one.example/debian bookworm main\n"),
    ("sources.list", "# deb http://commented.example/debian bookworm main\n"
                     "deb-src http://src.example/debian bookworm main\n"
                     "deb [arch=amd64 signed-by=/k.gpg] http://one.example/debian bookworm "
                     "contrib main\n"),
    ("sources.list", "deb [ arch=amd64 ] http://one.example/debian bookworm main # comment\n"),
    ("sources.list", "deb http://updates.example/debian bookworm-updates main\n"
                     "deb http://one.example/debian bookworm main\n"),
    ("debian.sources", SECURITY_822 + "\nTypes: deb deb-src\nURIs: http://one.example/debian\n"
                       "Suites: bookworm bookworm-updates\nComponents: main contrib\n"),
    ("debian.sources", "Types: deb\nURIs: http://off.example/debian\nSuites: bookworm\n"
                       "Components: main\nEnabled: no\n\n"
                       "Types: deb\nURIs: mirror+file:///etc/apt/mirrors/debian.list\n"
                       "  http://one.example/debian\nSuites: bookworm\nComponents: main\n"),
])
def test_mirror_is_the_first_apt_source_serving_bookworm_main(tmp_path, name, text):
    path = write(tmp_path / name, text)
    proc = print_mirror(str(path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "http://one.example/debian\n"


def test_sources_are_read_in_order_and_globs_expand(tmp_path):
    write(tmp_path / "sources.list", "# nothing here but a comment\n")
    write(tmp_path / "d" / "a.sources", SECURITY_822)  # a stanza that ends the file is read
    write(tmp_path / "d" / "b.list", "deb http://second.example/debian bookworm main\n")
    write(tmp_path / "d" / "c.sources", "Types: deb\nURIs: http://third.example/debian\n"
                                        "Suites: bookworm\nComponents: main\n")
    write(tmp_path / "d" / "z.list.disabled", "deb http://disabled.example/debian bookworm main\n")
    sources = f"{tmp_path}/sources.list {tmp_path}/d/*.sources {tmp_path}/d/*.list"
    proc = print_mirror(sources)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "http://third.example/debian\n"


def test_debian_mirror_overrides_the_apt_sources(tmp_path):
    path = write(tmp_path / "sources.list", "deb http://one.example/debian bookworm main\n")
    proc = print_mirror(str(path), DEBIAN_MIRROR="http://override.example/debian")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "http://override.example/debian\n"


@pytest.mark.parametrize("text", [
    "deb http://archive.ubuntu.example/ubuntu noble main\n",  # not a bookworm source
    SECURITY_822,
    "deb http://one.example/debian bookworm contrib non-free\n",  # no main
    "deb mirror+file:/etc/apt/mirrors/debian.list bookworm main\n",  # debootstrap cannot use it
    "deb http://one.example/debian bookworm contrib # main\n",  # main only in a comment
])
def test_no_bookworm_main_source_is_exit_3_naming_the_fix(tmp_path, text):
    path = write(tmp_path / "sources.list", text)
    proc = print_mirror(str(path))
    assert proc.returncode == 3
    assert proc.stdout == ""
    assert proc.stderr == (
        "build_base_image: no apt source of this machine serves 'deb URI bookworm main' "
        f"(read: {path}) (set DEBIAN_MIRROR to a Debian mirror that carries bookworm)\n")


def test_no_sources_file_at_all_says_where_it_looked(tmp_path):
    proc = print_mirror(f"{tmp_path}/missing.list {tmp_path}/d/*.sources")
    assert proc.returncode == 3
    assert (f"(read: no file, looked for {tmp_path}/missing.list {tmp_path}/d/*.sources)"
            in proc.stderr)


def test_the_script_names_no_mirror_of_its_own():
    text = SCRIPT.read_text()
    assert "http://" not in text and "https://" not in text
