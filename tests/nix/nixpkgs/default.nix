# A recording stand-in for nixpkgs, used by tests/test_nix_flake.py to evaluate flake.nix offline.
#
# It implements only the attributes and functions flake.nix and nix/*.nix call, and each returns a
# record of what it was given (plus an outPath, so "${drv}/bin/x" interpolates as with real nixpkgs).
# Like real nixpkgs, an unknown attribute is an "attribute missing" error and an unknown argument is
# "called with unexpected argument": no `...` (fetchPypi's, as in nixpkgs, only passes its
# attributes on to a strict function), so a typo in the flake fails the evaluation.
# Where real nixpkgs refuses something (a fetch without a hash, an unknown OCI config key, AMR-NB
# without --enable-version3, a fetchPypi argument its wheel URL has no place for) the stand-in
# refuses too, with a message. It is stricter than nixpkgs in four places, on purpose: a global
# `cudaSupport` is refused (it would build every CUDA-aware package, e.g. onnxruntime, against CUDA;
# the image's CUDA comes from the locked torch wheels); a postFixup string beside autoPatchelfHook
# without dontAutoPatchelf is refused (nixpkgs runs it first, and autoPatchelf then silently
# overwrites what it patched); stdenv.mkDerivation accepts only the
# attributes listed below (nixpkgs would pass a misspelt one on as an unused environment variable);
# python311.withPackages refuses a derivation that is not a python module (nixpkgs would silently
# leave it out of the environment).
#
# fetchPypi computes its URL the way nixpkgs' pkgs/build-support/fetchpypi does, except that the
# registry's host is left out (REGISTRY): the real one is nixpkgs' business, not this repository's.
# That each attribute exists at the pinned rev is only checked online (`nix flake check`).
{ system, config ? { } }:
let
  storePath = name: "/nix/store/00000000000000000000000000000000-${name}";
  # A derivation-like record: `kind` names the stand-in function that made it.
  drv = kind: name: fields: fields // { _standin = kind; inherit name; outPath = storePath name; };

  knownConfig = [ "allowUnfree" ];
  badConfig = builtins.filter (k: !(builtins.elem k knownConfig)) (builtins.attrNames config);

  lib = {
    concatMapStrings = f: list: builtins.concatStringsSep "" (map f list);
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

  python311 =
    let
      pythonDrv = drv "python3" "python3-3.11" { };
      sitePackages = "lib/python3.11/site-packages";
      ps = {
        setuptools = drv "python-package" "python3.11-setuptools" { pname = "setuptools"; };
        pip = drv "python-package" "python3.11-pip" { pname = "pip"; };
        # nixpkgs: marks a derivation as a python module of this interpreter (withPackages and
        # buildPythonPackage's dependencies then treat it as one).
        toPythonModule = d: d // { pythonModule = "python3.11"; };
        buildPythonPackage =
          { pname, version, src, pyproject ? null, build-system ? [ ], dependencies ? [ ]
          , pythonRelaxDeps ? [ ], pythonImportsCheck ? [ ], doCheck ? true, meta ? { } }:
          drv "buildPythonPackage" "python3.11-${pname}-${version}" {
            inherit pname version src pyproject build-system dependencies pythonRelaxDeps
              pythonImportsCheck doCheck meta;
            pythonModule = "python3.11";
          };
      };
      notModule = p: builtins.filter (d: !(d ? pythonModule)) p;
    in
    pythonDrv // {
      pkgs = ps;
      inherit sitePackages;
      interpreter = "${pythonDrv.outPath}/bin/python3.11";
      withPackages = f:
        let packages = f ps; in
        if notModule packages != [ ] then
          throw "stand-in nixpkgs: python3.11.withPackages: not python modules (use toPythonModule): ${toString (map (d: d.name) (notModule packages))}"
        else drv "python3.withPackages" "python3.11-env" { inherit packages; };
    };

  # nixpkgs' fetchPypi: strict wheel arguments (an unknown one is "called with unexpected
  # argument"), then fetchurl with the sha256.
  fetchPypi = { format ? "setuptools", sha256 ? "", hash ? "", ... }@attrs:
    let
      wheelUrl = { pname, version, dist ? "py2.py3", python ? "py2.py3", abi ? "none", platform ? "any" }:
        "https://REGISTRY/packages/${dist}/${builtins.substring 0 1 pname}/${pname}/${pname}-${version}-${python}-${abi}-${platform}.whl";
      url =
        if format == "wheel" then wheelUrl (removeAttrs attrs [ "format" "sha256" "hash" ])
        else throw "stand-in nixpkgs: fetchPypi format ${format}: only wheels are modelled";
      fetched = fetchurl {
        inherit url;
        sha256 = if sha256 == "" then null else sha256;
        hash = if hash == "" then null else hash;
      };
    in
    fetched // { _standin = "fetchPypi"; fetchPypiArgs = removeAttrs attrs [ "sha256" "hash" ]; };

  fetchurl = { url, sha256 ? null, hash ? null, name ? null }:
    let h = if sha256 != null then sha256 else hash; in
    if !(validHash h) then throw "stand-in nixpkgs: fetchurl ${url}: no valid sha256/hash given (fixed-output derivations need one)"
    else drv "fetchurl" (if name != null then name else baseNameOf url) { inherit url sha256 hash; };

  # stdenv.mkDerivation with the attributes nix/*.nix use and a few close relatives; anything
  # else is refused (a misspelt phase flag would otherwise be silently ignored).
  mkDerivation =
    { name ? null, pname ? null, version ? null, src ? null, dontUnpack ? false
    , dontConfigure ? false, dontBuild ? false, dontStrip ? false, dontFixup ? false
    , nativeBuildInputs ? [ ], buildInputs ? [ ], propagatedBuildInputs ? [ ]
    , autoPatchelfIgnoreMissingDeps ? [ ], dontAutoPatchelf ? false, installPhase ? ""
    , postFixup ? "", doInstallCheck ? false
    , installCheckPhase ? "", passthru ? { }, meta ? { } }@given:
    let
      n = if name != null then name else "${pname}-${version}";
      hooked = builtins.any (p: (p.name or "") == "auto-patchelf-hook") nativeBuildInputs;
    in
    if hooked && postFixup != "" && !dontAutoPatchelf then
      throw "stand-in nixpkgs: ${n}: a postFixup string runs before autoPatchelfHook's postFixupHooks entry, which then overwrites its runpath changes: set dontAutoPatchelf = true and call autoPatchelf in postFixup"
    else drv "stdenv.mkDerivation" n { inherit given; };

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
if config ? cudaSupport then throw "stand-in nixpkgs: config.cudaSupport builds every CUDA-aware package against CUDA (onnxruntime from source, for hours); the image's CUDA is the locked torch wheels'"
else if badConfig != [ ] then throw "stand-in nixpkgs: unknown config option(s): ${toString badConfig}"
else if system != "x86_64-linux" then throw "stand-in nixpkgs: only x86_64-linux is modelled, got ${system}"
else {
  inherit lib config system;

  inherit python311 fetchPypi fetchurl;
  stdenv = {
    inherit mkDerivation;
    cc.cc.lib = drv "package" "gcc-lib" { };
  };
  autoPatchelfHook = drv "package" "auto-patchelf-hook" { };
  patchelf = drv "package" "patchelf" { };
  zlib = drv "package" "zlib" { };
  ffmpeg-headless = (drv "package" "ffmpeg-headless" { }) // { override = ffmpegHeadless; };

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

  curl = tool "curl";
  bashInteractive = tool "bash-interactive";
  coreutils = tool "coreutils";
  gnugrep = tool "gnugrep";
  gnused = tool "gnused";
  gcc = tool "gcc-wrapper";
  cacert = tool "nss-cacert";
  skopeo = tool "skopeo";
}
