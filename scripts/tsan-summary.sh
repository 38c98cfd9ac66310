#!/bin/bash
# Summarises ThreadSanitizer reports in DIR (report.<pid> files): how many, and whether any
# names RidePush code (a frame in Sources/). Exits 1 if one does; reports only inside
# libwebsockets, libc or the Swift runtime are listed but do not fail.
dir=${1:?usage: tsan-summary.sh DIR}
shopt -s nullglob
files=("$dir"/report*)
if [ ${#files[@]} -eq 0 ]; then echo "tsan: no reports"; exit 0; fi
total=$(cat "${files[@]}" | grep -c '^WARNING: ThreadSanitizer')
ours=0
for f in "${files[@]}"; do
  # one report = from a WARNING line to the next SUMMARY line
  n=$(awk '/^WARNING: ThreadSanitizer/{r=""; inr=1} inr{r=r"\n"$0} /^SUMMARY: ThreadSanitizer/{ if (r ~ /Sources\//) c++; inr=0 } END{print c+0}' "$f")
  ours=$((ours + n))
done
echo "tsan: $total report(s) in ${#files[@]} file(s), $ours naming RidePush code (Sources/)"
grep -h '^SUMMARY: ThreadSanitizer' "${files[@]}" | sort | uniq -c | sort -rn | head -20
[ "$ours" -eq 0 ]
