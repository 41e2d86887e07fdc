#!/usr/bin/env bash
# Two nvprobes on one GPU host and a real cuInit: neither traces the
# other's reads (the another_nvprobe warning instead); and a shell that
# only looks at /dev/nvidia0 and runs 200 commands: text shows none of its
# lifecycle lines and counts them in the summary, JSON keeps them all.
# Run from the repository root, as root, with binaries in .dev/bin; writes
# $OUT/r.tgz (a.txt: the text of nvprobe A; b.ndjson: B's --json --raw).
set -u
cd "$(dirname "$0")/../.."
B=.dev/bin
mkdir -p "$OUT/r"
$B/nvprobe watch -o "$OUT/r/a.txt" --force > /dev/null 2>"$OUT/r/a.err" & A=$!
sleep 4
$B/nvprobe watch --json --raw -o "$OUT/r/b.ndjson" --force > /dev/null 2>"$OUT/r/b.err" & Bp=$!
sleep 4
python3 tests/scripts/cudawork.py cuinit > "$OUT/r/cuinit.json" 2>&1
sh -c 'test -e /dev/nvidia0; for i in $(seq 200); do /bin/true; done'
sh -c 'python3 tests/scripts/cudawork.py cuinit >/dev/null; /bin/true'
sleep 2
kill -INT $Bp; sleep 2; kill -INT $A; wait
echo "A's lines about B ($Bp): $(grep -c "\[$Bp[]/]" "$OUT/r/a.txt"); B's records of A ($A): $(grep -c "\"pid\":$A," "$OUT/r/b.ndjson")"
grep "another nvprobe" "$OUT/r/a.txt" | head -3
echo "B's another_nvprobe warnings: $(grep -c another_nvprobe "$OUT/r/b.ndjson")"
grep -E "^== .*cuInit|left out|^--- nvprobe summary" "$OUT/r/a.txt" | head -12
echo "A's text lines: $(wc -l < "$OUT/r/a.txt"); lifecycle lines in it: $(grep -cE ' forks pid | exec$| exited| receives | sends ' "$OUT/r/a.txt")"
echo "B's proc records: $(grep -c '"type":"proc"' "$OUT/r/b.ndjson")"
echo "B decoded with --all-processes, lifecycle lines: $($B/nvprobe decode "$OUT/r/b.ndjson" --all-processes 2>/dev/null | grep -cE ' forks pid | exec$| exited| receives | sends ')"
cd "$OUT" && tar czf r.tgz r && rm -rf r
