#!/usr/bin/env bash
# Fetch the three pinned benchmark trees (timm, diffusers, Lightning) into bench/corpus/ (gitignored; never commit
# them). Needs git and the network, once; bench/bench.py itself runs offline.
#
#   bench/get_corpus.sh            # all three trees
#   bench/get_corpus.sh timm       # just one
#
# Only the files at the pinned commit are kept (no .git), so that the tree is the same
# for every run and every tool. Then:
#
#   python bench/bench.py bench/corpus/timm --torchfix /tmp/torchfix-venv
#   python bench/bench.py bench/corpus/timm bench/corpus/diffusers bench/corpus/lightning --skip-torchfix
#
# TorchFix goes in a venv of its own (it pins another libcst; it does not need torch):
#   python3 -m venv /tmp/torchfix-venv && /tmp/torchfix-venv/bin/pip install torchfix==0.7.0
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
corpus="$here/corpus"

declare -A url commit
url[timm]=https://github.com/huggingface/pytorch-image-models.git
commit[timm]=aa4b5850c1543fa488abf260f18390eda46cf85d
url[diffusers]=https://github.com/huggingface/diffusers.git
commit[diffusers]=58eb52c0803ea9af3abec60841c2a093bdf1f951
url[lightning]=https://github.com/Lightning-AI/pytorch-lightning.git
commit[lightning]=7f0c3436cd3f6ad3753125672024fc415cbcb414

names=("$@")
[[ ${#names[@]} -gt 0 ]] || names=(timm diffusers lightning)

for name in "${names[@]}"; do
  if [[ -z "${url[$name]:-}" ]]; then
    echo "unknown tree: $name (known: ${!url[*]})" >&2
    exit 2
  fi
  target="$corpus/$name"
  if [[ -d "$target" ]]; then
    echo "$target exists; remove it to fetch again"
    continue
  fi
  clone=$(mktemp -d)
  trap 'rm -rf "$clone"' EXIT
  # A blobless partial clone: history without file contents, then the one commit's files.
  git clone --quiet --filter=blob:none --no-checkout "${url[$name]}" "$clone"
  git -C "$clone" checkout --quiet "${commit[$name]}"
  mkdir -p "$target"
  git -C "$clone" archive "${commit[$name]}" | tar -x -C "$target"
  rm -rf "$clone"
  trap - EXIT
  echo "$name: $(find "$target" -name '*.py' | wc -l) Python files at ${commit[$name]}"
done
