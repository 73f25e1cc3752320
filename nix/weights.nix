# The XLS-R 300M base weights as a fixed-output derivation, laid out where hearsay.detector.model loads them.
#
#   nix build .#weights   ->  result/opt/hearsay/weights/xls-r-300m/pytorch_model.bin
#
# Only pytorch_model.bin is fetched: hearsay.detector.model writes the architecture config in code (docs/DESIGN.md),
# so config.json and friends of the hub repo are not needed. fetchurl's flat sha256 is the sha256 of
# the file itself, i.e. exactly the pin in docs/DESIGN.md, checked again at box start by
# container/trainer/smoke_check.sh and at load time by hearsay.detector.model.
{ pkgs }:
let
  repo = "facebook/wav2vec2-xls-r-300m";
  revision = "1a640f32ac3e39899438a2931f9924c02f080a54";
  sha256 = "d5e490574712ad0a6736923b9ed11d4cd51c78609c36205f704fc4e87b11d2e0";
  dir = "/opt/hearsay/weights/xls-r-300m";

  bin = pkgs.fetchurl {
    name = "xls-r-300m-${builtins.substring 0 12 revision}-pytorch_model.bin";
    url = "https://huggingface.co/${repo}/resolve/${revision}/pytorch_model.bin";
    inherit sha256;
  };
in
{
  inherit repo revision sha256 dir;
  # A symlink into the store, not a copy: the 1.2 GB file stays one store path (one image layer).
  tree = pkgs.runCommand "xls-r-300m-weights" { passthru.pytorchModelBin = bin; } ''
    mkdir -p "$out${dir}"
    ln -s ${bin} "$out${dir}/pytorch_model.bin"
  '';
}
