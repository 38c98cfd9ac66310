#!/bin/bash
# Summarises ThreadSanitizer reports in DIR (log_path files: unit.<pid>, report.<pid>): how
# many, and how many name RidePush code (a frame in one of this package's Sources/ or Tests/
# targets), libwebsockets only, or something else only (libc, Foundation, the Swift
# runtime). Exits 1 if any names RidePush code; the others are listed but do not fail.
#
# The stacks of "Thread T… created by" are not looked at (every thread is started by RidePush
# code, so counting them would make a race inside lws ours), except in a thread-leak report,
# where the creation stack is the report. Only our targets' directories count: the toolchain's
# Foundation is built from directories named Sources/ too.
dir=${1:?usage: tsan-summary.sh DIR}
targets=$(cd "$(dirname "$0")/.." && ls -d Sources/*/ Tests/*/ | cut -d/ -f2 | paste -sd '|')
src="/(Sources|Tests)/($targets)/"
shopt -s nullglob
files=("$dir"/*)
if [ ${#files[@]} -eq 0 ]; then echo "tsan: no reports"; exit 0; fi
# one report = from a WARNING line to the next SUMMARY line
read -r total ours lws other < <(awk -v src="$src" '
  function done() { if (!inr) return; n++; if (o) c["ours"]++; else if (l) c["lws"]++; else c["other"]++; inr = 0 }
  /^WARNING: ThreadSanitizer/ { done(); inr = 1; o = 0; l = 0; skip = 0; leak = ($0 ~ /thread leak/); next }
  !inr { next }
  /^SUMMARY: ThreadSanitizer/ { done(); next }
  /^  [^ ]/ { skip = !leak && ($0 ~ /^  Thread T[0-9]+ .*created by/); next }
  skip { next }
  /^ +#[0-9]+ / { if ($0 ~ src) o = 1; else if ($0 ~ /libwebsockets\.so/) l = 1 }
  END { done(); print n + 0, c["ours"] + 0, c["lws"] + 0, c["other"] + 0 }' "${files[@]}")
echo "tsan: $total report(s) in ${#files[@]} file(s): $ours naming RidePush code, $lws inside libwebsockets only, $other elsewhere only"
grep -h '^SUMMARY: ThreadSanitizer' "${files[@]}" | sort | uniq -c | sort -rn | head -20
[ "$ours" -eq 0 ]
