#!/usr/bin/env bash
# On the GPU machine: a round longer than one device call, run detached (setsid) so that it goes on between calls
# while the machine stays held; each call waits a while and copies what the round has written so far.
#   bench/rounds/detached.sh start DIR COMMAND...   starts COMMAND (its output in DIR/round.log) unless DIR exists
#   bench/rounds/detached.sh wait DIR SECONDS OUT   waits up to SECONDS for it to end; copies DIR, packed, to OUT
set -uo pipefail
verb=$1 dir=$2
shift 2
case $verb in
  start)
    [ -e "$dir" ] && { echo "gpu_detached: $dir exists: the round was started already"; exit 0; }
    mkdir -p "$dir"
    setsid nohup bash -c '"$@"; echo $? >"$0/exit_status"' "$dir" "$@" >"$dir/round.log" 2>&1 </dev/null &
    echo "gpu_detached: started in $dir";;
  wait)
    seconds=$1 out=$2
    end=$((SECONDS + seconds))
    while [ ! -e "$dir/exit_status" ] && [ $SECONDS -lt $end ]; do sleep 5; done
    mkdir -p "$out"
    tar -C "$(dirname "$dir")" -czf "$out/$(basename "$dir").tar.gz" "$(basename "$dir")"
    if [ -e "$dir/exit_status" ]; then echo "gpu_detached: ended with status $(cat "$dir/exit_status")"
    else echo "gpu_detached: still running"; fi
    for log in "$dir"/*/runs/*.log "$dir"/runs/*.log; do
      [ -e "$log" ] && echo "$(basename "$log"): $(grep 'train_gpt: ' "$log" | tail -n 1)"
    done;;
  *) echo "usage: detached.sh start DIR COMMAND... | wait DIR SECONDS OUT" >&2; exit 2;;
esac
