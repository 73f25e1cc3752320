# A recording stand-in for nixpkgs, used by tests/test_nix_flake.py to evaluate flake.nix offline.
#
# It implements only the attributes and functions flake.nix and nix/*.nix call, and each returns a
# record of what it was given (plus an outPath, so "${drv}/bin/x" interpolates as with real nixpkgs).
# Like real nixpkgs, an unknown attribute is an "attribute missing" error and an unknown argument is
# "called with unexpected argument": no `...` anywhere, so a typo in the flake fails the evaluation.
# Where real nixpkgs refuses something (unfree without allowUnfree, a fetch without a hash, an unknown
# OCI config key, AMR-NB without --enable-version3) the stand-in refuses too, with a message.
#
# The python package names are ones seen under pkgs/development/python-modules/ in NixOS/nixpkgs;
# that they exist at the pinned rev is only checked online (`nix flake check`).
{ system, config ? { } }:
let
  storePath = name: "/nix/store/00000000000000000000000000000000-${name}";
  # A derivation-like record: `kind` names the stand-in function that made it.
  drv = kind: name: fields: fields // { _standin = kind; inherit name; outPath = storePath name; };

  allowUnfree = config.allowUnfree or false;
  cudaSupport = config.cudaSupport or false;
  knownConfig = [ "allowUnfree" "cudaSupport" ];
  badConfig = builtins.filter (k: !(builtins.elem k knownConfig)) (builtins.attrNames config);

  unfree = name: r:
    if allowUnfree then r
    else throw "stand-in nixpkgs: Package '${name}' has an unfree license, refusing to evaluate (set config.allowUnfree)";

  upper = [ "A" "B" "C" "D" "E" "F" "G" "H" "I" "J" "K" "L" "M" "N" "O" "P" "Q" "R" "S" "T" "U" "V" "W" "X" "Y" "Z" ];
  lower = [ "a" "b" "c" "d" "e" "f" "g" "h" "i" "j" "k" "l" "m" "n" "o" "p" "q" "r" "s" "t" "u" "v" "w" "x" "y" "z" ];

  lib = {
    toLower = builtins.replaceStrings upper lower;
    fileset = {
      # Records each path and whether it exists (the real toSource fails on a missing one; the test
      # asserts existence separately so it can name the file and its owner).
      unions = paths: { _fileset = map (p: { path = toString p; exists = builtins.pathExists p; }) paths; };
      toSource = { root, fileset }: drv "fileset.toSource" "source" {
        root = toString root;
        files = fileset._fileset;
      };
    };
  };

  pyPkg = attr: pname: drv "python-package" "python3-${pname}" { inherit attr pname; version = "standin"; };
  pythonModules = [
    "numpy" "soundfile" "soxr" "tqdm" "torch" "torchaudio" "transformers" "safetensors" "pandas"
    "scikit-learn" "scipy" "matplotlib" "imageio-ffmpeg" "onnx" "onnxscript" "onnxruntime"
    "setuptools" "pytest"
  ];
  basePythonSet = builtins.listToAttrs (map (n: { name = n; value = pyPkg n n; }) pythonModules) // {
    torch-bin = unfree "torch-bin" (pyPkg "torch-bin" "torch" // { inherit cudaSupport; });
    torchaudio-bin = unfree "torchaudio-bin" (pyPkg "torchaudio-bin" "torchaudio" // { inherit cudaSupport; });
    buildPythonPackage =
      { pname, version, src, pyproject ? null, build-system ? [ ], dependencies ? [ ]
      , pythonRelaxDeps ? [ ], pythonImportsCheck ? [ ], doCheck ? true, meta ? { } }:
      drv "buildPythonPackage" "python3-${pname}-${version}" {
        attr = pname;
        inherit pname version src pyproject build-system dependencies pythonRelaxDeps
          pythonImportsCheck doCheck meta;
      };
  };

  mkPython = overrides:
    let
      ps = if overrides == null then basePythonSet else basePythonSet // overrides ps basePythonSet;
    in
    drv "python3" "python3-standin" {
      pkgs = ps;
      withPackages = f: drv "python3.withPackages" "python3-env" { packages = f ps; };
      override = { self ? null, packageOverrides ? null }: mkPython packageOverrides;
    };

  # ffmpeg-headless.override: the flags' defaults are those of nixpkgs' ffmpeg/generic.nix for the
  # headless variant; `encoders` models which of the five codec-copy encoders the build then has.
  ffmpegHeadless = given@{ withOpencoreAmrnb ? false, withVersion3 ? true, withMp3lame ? true
    , withOpus ? true, withGPL ? true, withUnfree ? false }:
    if withOpencoreAmrnb && !withVersion3 then
      throw "stand-in nixpkgs: ffmpeg configure: libopencore_amrnb is version3 and --enable-version3 was not given"
    else
      drv "ffmpeg-headless.override" "ffmpeg-headless" {
        inherit given;
        flags = { inherit withOpencoreAmrnb withVersion3 withMp3lame withOpus withGPL withUnfree; };
        encoders = [ "aac" "pcm_mulaw" ]
          ++ (if withMp3lame then [ "libmp3lame" ] else [ ])
          ++ (if withOpus then [ "libopus" ] else [ ])
          ++ (if withOpencoreAmrnb then [ "libopencore_amrnb" ] else [ ]);
      };

  hexChars = "[0-9a-f]";
  validHash = h: h != null && (builtins.match "${hexChars}{64}" h != null
    || builtins.match "[0-9a-df-np-sv-z]{52}" h != null || builtins.match "sha256-[A-Za-z0-9+/]{43}=" h != null);

  ociConfigKeys = [ "Cmd" "Entrypoint" "Env" "ExposedPorts" "Labels" "User" "Volumes" "WorkingDir" "StopSignal" ];

  tool = name: drv "package" name { };
in
if badConfig != [ ] then throw "stand-in nixpkgs: unknown config option(s): ${toString badConfig}"
else if system != "x86_64-linux" then throw "stand-in nixpkgs: only x86_64-linux is modelled, got ${system}"
else {
  inherit lib config system;

  python3 = mkPython null;
  ffmpeg-headless = (drv "package" "ffmpeg-headless" { }) // { override = ffmpegHeadless; };

  fetchurl = { url, sha256 ? null, hash ? null, name ? null }:
    let h = if sha256 != null then sha256 else hash; in
    if !(validHash h) then throw "stand-in nixpkgs: fetchurl ${url}: no valid sha256/hash given (fixed-output derivations need one)"
    else drv "fetchurl" (if name != null then name else baseNameOf url) { inherit url sha256 hash; };

  runCommand = name: env: script: drv "runCommand" name { inherit env script; };

  writeShellApplication = { name, text, runtimeInputs ? [ ] }:
    drv "writeShellApplication" name { inherit text runtimeInputs; };

  mkShell = { packages ? [ ], env ? { }, shellHook ? "" }:
    drv "mkShell" "nix-shell" { inherit packages env shellHook; };

  dockerTools = {
    usrBinEnv = drv "package" "usr-bin-env" { };
    fakeNss = drv "package" "fake-nss" { };
    buildLayeredImage = { name, tag ? null, contents ? [ ], config ? { }, extraCommands ? ""
      , fakeRootCommands ? "", maxLayers ? 100, created ? "1970-01-01T00:00:01Z" }:
      let bad = builtins.filter (k: !(builtins.elem k ociConfigKeys)) (builtins.attrNames config); in
      if bad != [ ] then throw "stand-in nixpkgs: buildLayeredImage ${name}: unknown OCI config key(s): ${toString bad}"
      else drv "dockerTools.buildLayeredImage" "${name}.tar.gz" {
        imageName = name;
        imageTag = tag;
        inherit contents config extraCommands fakeRootCommands maxLayers created;
      };
  };

  rclone = tool "rclone";
  curl = tool "curl";
  bashInteractive = tool "bash-interactive";
  coreutils = tool "coreutils";
  gnugrep = tool "gnugrep";
  gnused = tool "gnused";
  cacert = tool "nss-cacert";
  skopeo = tool "skopeo";
  vastai = tool "vastai";
  shellcheck = tool "shellcheck";
  bats = tool "bats";
  ruff = tool "ruff";
}
