# Evaluate flake.nix offline with the recording stand-in as its nixpkgs and a fake `self`, and return
# plain data (the records, minus outPaths) for tests/test_nix_flake.py to assert on:
#
#   nix-instantiate --store dummy:// --eval --strict --json \
#     -E 'import ./tests/nix/eval-flake.nix { rev = "<40 hex>"; }'
#
# `rev` empty means a dirty checkout (self.dirtyRev instead of self.rev, as Nix gives it).
{ repo ? ../.., rev ? "0123456789abcdef0123456789abcdef01234567" }:
let
  flake = import (repo + "/flake.nix");
  lock = builtins.fromJSON (builtins.readFile (repo + "/flake.lock"));
  nixpkgs = { outPath = ./nixpkgs; inherit (lock.nodes.nixpkgs.locked) rev narHash lastModified; };
  self = { outPath = toString repo; }
    // (if rev == "" then { dirtyRev = "fedcba9876543210fedcba9876543210fedcba98-dirty"; } else { inherit rev; });
  out = flake.outputs { inherit self nixpkgs; };

  # Records -> JSON-able data. Functions become a marker; outPath is dropped from records (toJSON would
  # otherwise print a record as its path) and kept as `_path` so a test can match interpolations.
  dump = v:
    if builtins.isFunction v then "<function>"
    else if builtins.isList v then map dump v
    else if builtins.isAttrs v then
      (builtins.mapAttrs (_: dump) (removeAttrs v [ "outPath" "pkgs" "override" "withPackages" ]))
      // (if v ? outPath then { _path = toString v.outPath; } else { })
    else v;
  sys = "x86_64-linux";
in
{
  inputs = flake.inputs;
  outputNames = builtins.mapAttrs (_: builtins.attrNames) out;
  packages = dump out.packages.${sys};
  apps = dump out.apps.${sys};
  devShell = dump out.devShells.${sys}.default;
  checks = dump out.checks.${sys};
  # `nix build .#python`: requirements.lock's wheels (one derivation) + hearsay.
  python = dump out.packages.${sys}.python;
}
