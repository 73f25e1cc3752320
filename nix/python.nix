# The image's Python: nixpkgs' CPython 3.11 and exactly the wheels of requirements.lock, which is
# what `make test` installs (pip --require-hashes). Nothing here comes from nixpkgs' python package
# set: its versions are not the lock's (docs/DESIGN.md, "Pinned facts for the Nix image").
#
#   requirements.lock --nix/lock_to_nix.py--> nix/wheels.nix (name, version, tags, sha256)
#     -> one fixed-output fetchPypi per wheel -> `site`: every wheel pip-installed into one prefix
#        (no index, no dependency resolution: the lock is the whole closure), ELF files patched
#        (autoPatchelf, then the wheels' $ORIGIN runpaths restored), CUDA libraries load-checked
#     -> hearsay built from this tree on top -> `env` (the image) and `devEnv` (nix develop)
{ pkgs, root }:
let
  project = (builtins.fromTOML (builtins.readFile (root + "/pyproject.toml"))).project;
  # The lock's wheels are cp311 (and abi3/py3); the interpreter must be the same minor.
  python = pkgs.python311;
  locked = import ./wheels.nix;
  # The fix-up step around autoPatchelf (see `site`): one script, also what the tests run.
  keepRunpaths = root + "/nix/keep_runpaths.py";

  # fetchPypi's wheel URL is the registry's own path for {dist}/{first letter}/{pname}/{file};
  # `sha256` (the lock's, hex) makes each one a fixed-output fetch.
  wheels = map
    (w: {
      file = "${w.pname}-${w.version}-${w.python}-${w.abi}-${w.platform}.whl";
      src = pkgs.fetchPypi {
        inherit (w) pname version dist python abi platform sha256;
        format = "wheel";
      };
    })
    locked;
  # pip reads a wheel's name and tags from its file name; a store path has a hash in front.
  linkWheels = pkgs.lib.concatMapStrings (w: ''
    ln -s ${w.src} wheels/${w.file}
  '') wheels;

  site = python.pkgs.toPythonModule (pkgs.stdenv.mkDerivation {
    name = "python3.11-locked-wheels";
    # The fetched wheels, for `nix eval` and tests/test_nix_flake.py (the lock, evaluated).
    passthru.wheels = map (w: w.src) wheels;
    dontUnpack = true;
    dontConfigure = true;
    dontBuild = true;
    # torch/cuDNN/NCCL wheels: stripping breaks them (nixpkgs' torch-bin says the same).
    dontStrip = true;
    # autoPatchelf gives every ELF file a RUNPATH to the libraries it needs: those in the wheels
    # themselves (torch -> nvidia/*/lib; torchao's extensions -> torch/lib's libc10/libtorch*
    # and nvidia/cu13/lib's libcudart.so.13; the *.libs/ of auditwheel), glibc (stdenv), and these.
    # It *replaces* the wheel's RUNPATH, and cuDNN dlopens its sub-libraries through `$ORIGIN`
    # (libcudnn.so.9 -> libcudnn_graph.so.9, ...): keepRunpaths puts the wheels' $ORIGIN entries
    # back (save before, restore after; tests/test_cuda_libs.py runs the same two commands).
    nativeBuildInputs = [ pkgs.autoPatchelfHook pkgs.patchelf ];
    # Run by hand in postFixup: a `postFixup` string runs *before* the hook's own entry in
    # postFixupHooks, so a restore there would be overwritten.
    dontAutoPatchelf = true;
    buildInputs = [
      pkgs.stdenv.cc.cc.lib # libstdc++.so.6, libgcc_s.so.1
      pkgs.zlib # libz.so.1: cuDNN, triton, pillow, numpy's and scipy's gfortran
    ];
    # NEEDED by some locked ELF file and provided by no wheel and no input above
    # (`nix/lock_to_nix.py needed --wheels DIR` lists them from the downloaded wheels):
    autoPatchelfIgnoreMissingDeps = [
      # torch/lib/libcaffe2_nvrtc.so: the driver, which the NVIDIA container hook mounts from the
      # host at run time; found through the image's LD_LIBRARY_PATH (nix/trainer-image.nix)
      "libcuda.so.1"
      # nvidia/cu13/lib/libcufile_rdma.so.1: GPUDirect Storage over RDMA (not used)
      "libibverbs.so.1"
      "librdmacm.so.1"
      "libmlx5.so.1"
      # nvidia/nvshmem/lib/nvshmem_{bootstrap,transport}_*.so.3: multi-node bootstrap and
      # transport plugins, dlopened only when asked for (one box is one node)
      "libmpi.so.40"
      "libpmix.so.2"
      "liboshmem.so.40"
      "libfabric.so.1"
      "libucp.so.0"
      "libucs.so.0"
    ];
    installPhase = ''
      runHook preInstall
      mkdir wheels
      ${linkWheels}
      PYTHONPATH=${python.pkgs.pip}/${python.sitePackages} ${python.interpreter} -m pip install \
        --no-index --no-deps --no-cache-dir --disable-pip-version-check --prefix "$out" wheels/*.whl
      ${python.interpreter} ${keepRunpaths} save "$out" "$NIX_BUILD_TOP/runpaths.json"
      runHook postInstall
    '';
    postFixup = ''
      autoPatchelf -- "$out"
      ${python.interpreter} ${keepRunpaths} restore "$out" "$NIX_BUILD_TOP/runpaths.json"
    '';
    # The hard gates, after patching: the installed distributions are the lock's, every one of
    # them at the lock's version, nothing more (scripts/check_versions.py); and torch's cuDNN,
    # cuBLAS, cuFFT and NCCL load and answer their version without a GPU
    # (nix/check_cuda_libs.py). Exit 1 of either fails the build.
    doInstallCheck = true;
    installCheckPhase = ''
      PYTHONPATH="$out/${python.sitePackages}" ${python.interpreter} \
        ${root + "/scripts/check_versions.py"} --lock ${root + "/requirements.lock"}
      ${python.interpreter} ${root + "/nix/check_cuda_libs.py"} --site "$out/${python.sitePackages}"
    '';
  });

  hearsay = python.pkgs.buildPythonPackage {
    pname = project.name;
    version = project.version;
    pyproject = true;
    # Only what the wheel is built from: editing tests/ or runner/ does not rebuild the package.
    src = pkgs.lib.fileset.toSource {
      inherit root;
      fileset = pkgs.lib.fileset.unions [
        (root + "/pyproject.toml")
        (root + "/README.md")
        (root + "/src") # every package, hearsay.export included
      ];
    };
    build-system = [ python.pkgs.setuptools ];
    # Its runtime dependencies (and everything else the lock pins) are `site`.
    dependencies = [ site ];
    pythonImportsCheck = [ "hearsay" "hearsay.sound.audio" ];
  };
in
{
  inherit python site hearsay wheels;
  # The image's interpreter: the locked wheels + hearsay.
  env = python.withPackages (_: [ hearsay ]);
  # The dev shell's: the same wheels (pytest, ruff, bats, shellcheck, rclone, vastai are in the
  # lock too); hearsay itself comes from the checkout via PYTHONPATH.
  devEnv = python.withPackages (_: [ site ]);
}
