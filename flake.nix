{
  # hearsay's trainer image and dev shell. Walk-through: docs/RUNBOOK.md, "1. Build the trainer image".
  #   nix build .#trainer-image      the OCI image the boxes run (gzipped docker-archive in ./result)
  #   nix run .#push-trainer-image -- docker://REGISTRY/hearsay-trainer:TAG   push + record the digest
  #   nix develop                    the same Python and tools as the image
  #   nix flake check                evaluates everything; builds the ffmpeg encoder and version checks
  description = "hearsay: XLS-R 300M speech-deepfake detector - trainer image";

  # One input, pinned in flake.lock (rev + narHash from docs/DESIGN.md).
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-25.11";

  outputs = { self, nixpkgs }:
    let
      system = "x86_64-linux";
      # No config: nothing in the image builds against CUDA (torch's CUDA comes in the locked
      # wheels, nix/python.nix) and nothing unfree is taken from nixpkgs.
      pkgs = import nixpkgs { inherit system; };
      root = ./.;
      # A dirty tree builds, but the smoke check refuses its image on a box (no revision to trace).
      gitRev = self.rev or self.dirtyRev or "unknown";
      tag = if self ? rev then builtins.substring 0 12 self.rev else "dirty";

      py = import ./nix/python.nix { inherit pkgs root; };
      ffmpeg = import ./nix/ffmpeg.nix { inherit pkgs; };
      weights = import ./nix/weights.nix { inherit pkgs; };
      trainer-image = import ./nix/trainer-image.nix {
        inherit pkgs root gitRev tag py ffmpeg weights;
        nixpkgsRev = nixpkgs.rev or "unknown";
      };

      push = pkgs.writeShellApplication {
        name = "push-trainer-image";
        runtimeInputs = [ pkgs.skopeo pkgs.coreutils ];
        text = ''
          # Usage: nix run .#push-trainer-image -- docker://REGISTRY/hearsay-trainer:TAG [DIGEST_FILE]
          # Summary: copy the trainer image to a registry and record its digest (default
          #   ./trainer-image.digest) for the runner's config: boxes launch it by digest, never by tag.
          if [ $# -lt 1 ] || [ $# -gt 2 ] || [[ "$1" != docker://* ]]; then
            echo "push-trainer-image: usage: push-trainer-image docker://REGISTRY/REPO:TAG [DIGEST_FILE]" >&2
            exit 2
          fi
          dest="$1"
          digest_file="''${2:-trainer-image.digest}"
          skopeo copy --digestfile "$digest_file" "docker-archive:${trainer-image}" "$dest"
          echo "pushed hearsay-trainer:${tag} (rev ${gitRev})"
          echo "image: ''${dest#docker://}@$(cat "$digest_file")"
        '';
      };
    in
    {
      packages.${system} = {
        inherit trainer-image ffmpeg;
        default = trainer-image;
        hearsay = py.hearsay;
        # The image's interpreter: requirements.lock's wheels + hearsay (`nix build .#python`).
        python = py.env;
        weights = weights.tree;
        push-trainer-image = push;
      };

      apps.${system}.push-trainer-image = {
        type = "app";
        program = "${push}/bin/push-trainer-image";
      };

      devShells.${system}.default = pkgs.mkShell {
        # pytest, ruff, bats, shellcheck, rclone and vastai are locked wheels in py.devEnv.
        packages = [ py.devEnv ffmpeg pkgs.curl pkgs.skopeo ];
        env = {
          HEARSAY_FFMPEG = "${ffmpeg}/bin/ffmpeg";
          HF_HUB_OFFLINE = "1";
        };
        # hearsay itself from the checkout (src/hearsay; hearsay.export is inside the package).
        shellHook = ''
          export PYTHONPATH="$PWD/src''${PYTHONPATH:+:$PYTHONPATH}"
        '';
      };

      checks.${system} = {
        # The five encoders the codec copies need, checked on the built ffmpeg.
        ffmpeg-encoders = pkgs.runCommand "ffmpeg-encoders-check" { } ''
          ${ffmpeg}/bin/ffmpeg -hide_banner -encoders > encoders.txt
          for enc in libmp3lame libopus aac libopencore_amrnb pcm_mulaw; do
            grep -Eq "^ [A-Z.]{6} $enc( |$)" encoders.txt || { echo "ffmpeg lacks encoder $enc" >&2; exit 1; }
          done
          touch "$out"
        '';
        # The image's whole interpreter (hearsay included) against the lock: every package, exact
        # versions (the locked wheels alone are gated the same way inside their own build).
        python-versions = pkgs.runCommand "python-versions-check" { } ''
          ${py.env}/bin/python3 ${./scripts/check_versions.py} --lock ${./requirements.lock}
          touch "$out"
        '';
      };
    };
}
