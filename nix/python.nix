# The image's Python: nixpkgs' python3 with CUDA torch (the prebuilt torch-bin wheel, unfree) standing
# in for torch everywhere, and hearsay built from this source tree.
#
# One source of truth: the dependency NAMES come from pyproject.toml ([project].dependencies plus the
# "train" extra). The VERSIONS are nixpkgs' at the pinned rev, not requirements.lock's; hearsay's own
# `==` pins are relaxed here and scripts/check_versions.py checks torch/torchaudio stay within the
# lock's minor release (docs/RUNBOOK.md, "Versions").
{ pkgs, root }:
let
  pyproject = builtins.fromTOML (builtins.readFile (root + "/pyproject.toml"));
  project = pyproject.project;

  # "soxr>=0.5" -> "soxr"; "scikit-learn" stays; PyPI names are case- and _/- insensitive.
  reqName = req: builtins.replaceStrings [ "_" "." ] [ "-" "-" ]
    (pkgs.lib.toLower (builtins.head (builtins.match "[[:space:]]*([A-Za-z0-9._-]+).*" req)));

  # Requirements the image gets some other way. imageio-ffmpeg: the image's ffmpeg is nix/ffmpeg.nix,
  # handed to hearsay.audio through $HEARSAY_FFMPEG (the wheel's bundled binary is not used).
  providedElsewhere = [ "imageio-ffmpeg" ];
  # PyPI name -> nixpkgs attribute, where they differ (none today; add here, never re-list deps).
  nixAttr = { };

  runtimeNames = builtins.filter (n: !(builtins.elem n providedElsewhere))
    (map reqName (project.dependencies ++ project.optional-dependencies.train));
  pinnedNames = map reqName (builtins.filter (r: builtins.match ".*==.*" r != null)
    (project.dependencies ++ project.optional-dependencies.train));

  python = pkgs.python3.override {
    self = python;
    # CUDA torch from the wheel (cudaSupport + allowUnfree are set where nixpkgs is imported);
    # every package that depends on torch gets the same one.
    packageOverrides = final: prev: {
      torch = prev.torch-bin;
      torchaudio = prev.torchaudio-bin;
    };
  };
  ps = python.pkgs;
  deps = map (n: ps.${nixAttr.${n} or n}) runtimeNames;

  hearsay = ps.buildPythonPackage {
    pname = project.name;
    version = project.version;
    pyproject = true;
    # Only what the wheel is built from: editing tests/ or runner/ does not rebuild the package.
    src = pkgs.lib.fileset.toSource {
      inherit root;
      fileset = pkgs.lib.fileset.unions [
        (root + "/pyproject.toml")
        (root + "/README.md")
        (root + "/src")
        (root + "/export")
      ];
    };
    build-system = [ ps.setuptools ];
    dependencies = deps;
    # hearsay pins torch/torchaudio/transformers with == for pip; nixpkgs has its own versions.
    pythonRelaxDeps = pinnedNames;
    pythonImportsCheck = [ "hearsay" "hearsay.audio" ];
  };
in
{
  inherit python hearsay runtimeNames;
  # The image's interpreter: hearsay + its runtime deps.
  env = python.withPackages (_: [ hearsay ]);
  # The dev shell's: the same deps + pytest (hearsay itself comes from the checkout via PYTHONPATH).
  devEnv = python.withPackages (p: deps ++ [ p.pytest ]);
}
