#!/bin/sh
# The trainer's --local-steps, end to end against its serial reference: 4 ranks as 2 emulated nodes of 2, two runs of
# 50 steps on a subset (H 3, 1 bit, the default momentum recipe; H 4, 2 bits, Adam), each ending with an outer step
# that is not an H-th one. local_steps_reference trains the same 4 ranks in one process, every sum from the serial
# simulation, and rank 0's final parameters must be the same bytes in both. Exits 77 (skipped) without the data set.
#   local_steps_test.sh TRAIN_BINARY REFERENCE_BINARY MPIEXEC
set -u
train=$1 reference=$2 mpiexec=$3
[ -d /usr/share/datasets/fashion-mnist ] || { echo "skipped: apt-get install dataset-fashion-mnist"; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
status=0
check() {  # check NAME ARGS...: the trainer and the reference with the same flags
  name=$1
  shift
  "$mpiexec" -np 4 --oversubscribe "$train" --ranks-per-node 2 --epochs 2 --batch 16 --train-subset 1600 \
    --test-subset 200 "$@" --dump-parameters "$out/$name.train.f32" >"$out/$name.txt" 2>&1 ||
    { cat "$out/$name.txt"; exit 1; }
  grep "^# local steps" "$out/$name.txt"
  "$reference" --ranks 4 --ranks-per-node 2 --epochs 2 --batch 16 --train-subset 1600 "$@" \
    --dump-parameters "$out/$name.reference.f32" || exit 1
  [ -s "$out/$name.train.f32" ] || { echo "FAIL $name: the trainer wrote no parameters"; exit 1; }
  if cmp -s "$out/$name.train.f32" "$out/$name.reference.f32"; then
    echo "$name: the same $(wc -c <"$out/$name.train.f32") bytes"
  else
    echo "FAIL $name: $(cmp -l "$out/$name.train.f32" "$out/$name.reference.f32" | wc -l) bytes differ"
    status=1
  fi
}
check h3_1bit --local-steps 3 --bits 1
check h4_2bit_adam --local-steps 4 --bits 2 --optimizer adam --lr 0.003 --outer-lr 0.5 --outer-momentum 0.8
[ "$status" -eq 0 ] && echo "PASS"
exit "$status"
