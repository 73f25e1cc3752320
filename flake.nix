{
  # hearsay's trainer image and dev shell. Walk-through: docs/RUNBOOK.md, "1. Build the trainer image".
  #   nix build .#trainer-image      the OCI image the boxes run (gzipped docker-archive in ./result)
  #   nix run .#push-trainer-image -- docker://REGISTRY/hearsay-trainer:TAG   push + record the digest
  #   nix develop                    the same Python and tools as the image
  #   nix flake check                evaluates everything and builds the ffmpeg encoder check
  description = "hearsay: XLS-R 300M speech-deepfake detector - trainer image";

  # One input, pinned in flake.lock (rev + narHash from ../shared/DESIGN.md).
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-25.11";

  outputs = { self, nixpkgs }:
    let
      system = "x86_64-linux";
      pkgs = import nixpkgs {
        inherit system;
        # torch-bin is unfree (CUDA, MKL); cudaSupport makes every CUDA-aware package build for it.
        config = { allowUnfree = true; cudaSupport = true; };
      };
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
        # `nix eval --raw .#python.pkgs.torch.version` feeds scripts/check_versions.py.
        python = py.python;
        weights = weights.tree;
        push-trainer-image = push;
      };

      apps.${system}.push-trainer-image = {
        type = "app";
        program = "${push}/bin/push-trainer-image";
      };

      devShells.${system}.default = pkgs.mkShell {
        packages = [ py.devEnv ffmpeg pkgs.rclone pkgs.curl pkgs.skopeo pkgs.shellcheck pkgs.bats pkgs.ruff ];
        env = {
          HEARSAY_FFMPEG = "${ffmpeg}/bin/ffmpeg";
          HF_HUB_OFFLINE = "1";
        };
        # hearsay itself from the checkout (package-dir: hearsay -> src/hearsay, export -> export).
        shellHook = ''
          export PYTHONPATH="$PWD/src:$PWD''${PYTHONPATH:+:$PYTHONPATH}"
        '';
      };

      # The five encoders the codec copies need, checked on the built ffmpeg (runs in `nix flake check`).
      checks.${system}.ffmpeg-encoders = pkgs.runCommand "ffmpeg-encoders-check" { } ''
        ${ffmpeg}/bin/ffmpeg -hide_banner -encoders > encoders.txt
        for enc in libmp3lame libopus aac libopencore_amrnb pcm_mulaw; do
          grep -Eq "^ [A-Z.]{6} $enc( |$)" encoders.txt || { echo "ffmpeg lacks encoder $enc" >&2; exit 1; }
        done
        touch "$out"
      '';
    };
}
