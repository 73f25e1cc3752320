# ffmpeg for the codec copies: a headless ffmpeg with the five encoders the augmentation uses
# (libmp3lame, libopus, aac, libopencore_amrnb, pcm_mulaw). aac and pcm_mulaw are native encoders;
# the other three need their libraries. In nixpkgs only ffmpeg-full enables AMR-NB among the stock
# variants, so this is the lean override (docs/DESIGN.md "Pinned facts for the Nix image").
# opencore-amr is Apache-2.0: ffmpeg must be built with --enable-version3 (withVersion3) to link it.
{ pkgs }:
pkgs.ffmpeg-headless.override {
  withOpencoreAmrnb = true;
  withVersion3 = true;
  withMp3lame = true; # already on in headless; stated so a nixpkgs default change cannot drop it
  withOpus = true;
}
