#!/usr/bin/env bash
# Checks the training kernels' PTX (one file per .cu, given as arguments) for what their
# bit-for-bit equality with the CPU kernels rests on: no fused multiply-add (fma.*), no
# flush-to-zero (*.ftz) and no calls (every codec inlined, none recursive). The files together
# must hold kernel entries (scale.cu only launches convert's).
set -euo pipefail
status=0
entries=0
for ptx in "$@"; do
  entries=$((entries + $(grep -c '\.entry' "$ptx" || true)))
  if grep -nE '^\s*fma\.|\.ftz|^\s*call(\.uni)?\s' "$ptx" >&2; then
    echo "$ptx: the instructions above break bit-for-bit equality with the CPU kernels" >&2
    status=1
  fi
done
if [ "$entries" -eq 0 ]; then
  echo "ptx_check: no kernel entry in $*" >&2
  status=1
fi
[ "$status" -eq 0 ] && echo "ptx_check: $entries kernels in $# files, without fma, ftz or calls"
exit "$status"
