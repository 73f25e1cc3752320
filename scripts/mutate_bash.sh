#!/usr/bin/env bash
# Usage: scripts/mutate_bash.sh [--list FILE] [--only REGEX] [--timeout S] [--no-baseline] [--out FILE] [--check]
# Summary: break the runner's bash rules one find/replace at a time and see whether their bats tests notice
#
# Each mutation of the list (default scripts/bash_mutations.txt; its head says the format) replaces
# one exact string of one runner file with another, in a scratch copy of this tree (tracked and
# untracked files that git does not ignore, in a git repository of their own; .venv linked, not
# copied), runs the bats file it names
# (with its `-f` filter, when it gives one) there, and puts the file back before the next. The
# working tree is never written: a crash leaves at most a scratch folder under TMPDIR behind.
#
#   killed    the bats file reported at least one `not ok` under the mutation
#   timeout   it ran past --timeout seconds (default 600): counted apart, never as killed
#   survived  every selected test passed under the mutation
#   stale     the find string is not in the file (the code moved on: fix the list), or is there more
#             than once (ambiguous: make it longer); never run, never counted as killed
#   error     the run failed without a `not ok` (no test selected, a setup that broke): not counted
#
# Unless --no-baseline, each (bats file, filter) runs once unmutated before its first mutation: a
# baseline that is not green makes its mutations "error" (a red test kills nothing).
# --only REGEX keeps the mutations whose name matches (grep -E). --out FILE also writes one line
# per mutation: NAME<TAB>OUTCOME<TAB>SECONDS. --check runs nothing: it says which mutations are stale
# and which filters select no test (bats --count).
#
# Exit codes: 0 every mutation run was killed (--check: none stale, every filter selects a test); 1 at least one survived or timed out; 2 usage;
# 3 a mutation is stale or errored, or a baseline failed (the tally is printed either way).
set -euo pipefail
[ -n "${RUNNER_DEBUG:-}" ] && set -x

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LIST=$REPO/scripts/bash_mutations.txt ONLY="" TIMEOUT_S=600 BASELINE=1 OUT="" CHECK=0

usage() { sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p;}' "${BASH_SOURCE[0]}"; }
die() { echo "mutate_bash: $2" >&2; exit "$1"; }

while [ $# -gt 0 ]; do
  case $1 in
    --list) LIST=${2:?--list FILE}; shift 2 ;;
    --only) ONLY=${2:?--only REGEX}; shift 2 ;;
    --timeout) TIMEOUT_S=${2:?--timeout S}; shift 2 ;;
    --no-baseline) BASELINE=0; shift ;;
    --out) OUT=${2:?--out FILE}; shift 2 ;;
    --check) CHECK=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die 2 "unknown argument '$1' (see --help)" ;;
  esac
done
case $TIMEOUT_S in '' | *[!0-9]*) die 2 "--timeout '$TIMEOUT_S' is not a whole number of seconds" ;; esac
[ -r "$LIST" ] || die 2 "no mutation list at $LIST (give --list FILE)"
[ -x "$REPO/.venv/bin/bats" ] || die 2 "no $REPO/.venv/bin/bats (run: make install)"
for c in git tar timeout; do command -v "$c" >/dev/null || die 2 "needs $c on PATH"; done

# 1. The list: blocks of "@ NAME" then "file:", "find:", "replace:", "bats:", optional "filter:".
names=() files=() finds=() repls=() batss=() filters=()
add() {
  [ -n "$name" ] || return 0
  [ -n "$file" ] && [ -n "$find" ] && [ -n "$bats" ] && [ "$have_repl" = 1 ] \
    || die 2 "$LIST: mutation '$name' lacks one of file:, find:, replace:, bats:"
  if [ -z "$ONLY" ] || printf '%s\n' "$name" | grep -Eq -- "$ONLY"; then
    names+=("$name") files+=("$file") finds+=("$find") repls+=("$repl") batss+=("$bats") filters+=("$filter")
  fi
}
name="" file="" find="" repl="" bats="" filter="" have_repl=0
while IFS= read -r line || [ -n "$line" ]; do
  case $line in
    '#'* | '') ;;
    '@ '*) add; name=${line#@ } file="" find="" repl="" bats="" filter="" have_repl=0 ;;
    'file: '*) file=${line#file: } ;;
    'find: '*) find=${line#find: } ;;
    'replace:'*) repl=${line#replace:}; repl=${repl# }; have_repl=1 ;;
    'bats: '*) bats=${line#bats: } ;;
    'filter: '*) filter=${line#filter: } ;;
    *) die 2 "$LIST: cannot read line '$line' (see the list's head for the format)" ;;
  esac
done <"$LIST"
add
[ "${#names[@]}" -gt 0 ] || die 2 "no mutation selected from $LIST${ONLY:+ by --only $ONLY}"

# 2. The scratch tree: what git would commit (tracked + untracked, not ignored), .venv linked.
scratch=$(mktemp -d "${TMPDIR:-/tmp}/mutate_bash.XXXXXX") || die 2 "cannot make a scratch folder under ${TMPDIR:-/tmp}"
trap 'rm -rf "$scratch"' EXIT
trap 'exit 130' INT TERM   # the EXIT trap then removes the scratch tree
(cd "$REPO" && git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - 2>/dev/null) \
  | tar -xf - -C "$scratch"
ln -s "$REPO/.venv" "$scratch/.venv"
# a repository of its own with one empty commit: the fake box's environment reads HEAD
# (tests/runner/bin/box_environ.sh, HEARSAY_GIT_SHA); nothing reaches this tree's .git
git -C "$scratch" init -q && git -C "$scratch" -c user.name=mutate_bash -c user.email=mutate_bash@localhost \
  commit -q --allow-empty -m "scratch tree of scripts/mutate_bash.sh"

# run_bats BATS FILTER LOG: run one bats file in the scratch tree; print killed|survived|timeout|error.
run_bats() {
  local rc=0
  (cd "$scratch" && PATH="$scratch/.venv/bin:$PATH" timeout "$TIMEOUT_S" \
    .venv/bin/bats ${2:+-f "$2"} "$1") >"$3" 2>&1 || rc=$?
  if [ "$rc" = 124 ]; then echo timeout
  elif grep -q '^not ok ' "$3"; then echo killed
  elif [ "$rc" = 0 ] && grep -q '^ok ' "$3"; then echo survived
  else echo error
  fi
}

# apply FILE FIND REPLACE: replace the one occurrence of FIND in the scratch FILE (taken afresh from
# the working tree); 1 when FIND is missing, 2 when it occurs more than once.
apply() {
  local text rest n=0
  IFS= read -r -d '' text <"$REPO/$1" || true
  rest=$text
  while [[ $rest == *"$2"* ]]; do rest=${rest#*"$2"}; n=$((n + 1)); done
  [ "$n" -gt 0 ] || return 1
  [ "$n" -eq 1 ] || return 2
  printf '%s' "${text/"$2"/"$3"}" >"$scratch/$1"
}

if [ "$CHECK" = 1 ]; then
  bad=0
  for i in "${!names[@]}"; do
    rc=0; apply "${files[$i]}" "${finds[$i]}" "${repls[$i]}" || rc=$?
    cp "$REPO/${files[$i]}" "$scratch/${files[$i]}"
    n=$(cd "$scratch" && .venv/bin/bats --count ${filters[$i]:+-f "${filters[$i]}"} "${batss[$i]}" 2>/dev/null) || n=0
    case $rc in 0) s=ok ;; 1) s="stale (not in ${files[$i]})" ;; *) s="stale (more than once in ${files[$i]})" ;; esac
    [ "$rc" = 0 ] && [ "$n" -gt 0 ] || bad=1
    printf '%-40s %s; %s test(s) selected in %s\n' "${names[$i]}" "$s" "$n" "${batss[$i]}"
  done
  exit $((bad * 3))
fi

logs=$scratch/.logs
mkdir -p "$logs"
declare -A base=()
# baseline I: run mutation I's bats file and filter unmutated, once per (file, filter), just before
# its first mutation (a run cut short still has each result it printed judged against its baseline).
baseline() {
  local k="${batss[$1]}|${filters[$1]}"
  [ -z "${base[$k]:-}" ] || return 0
  base[$k]=$(run_bats "${batss[$1]}" "${filters[$1]}" "$logs/baseline.$1")
  echo "baseline ${batss[$1]}${filters[$1]:+ -f \"${filters[$1]}\"}: ${base[$k]/survived/green}"
  [ "${base[$k]}" = survived ] || { echo "--- its output:"; tail -n 20 "$logs/baseline.$1"; }
}

# 3. Each mutation in turn.
killed=0 survived=0 timedout=0 stale=0 errors=0
[ -z "$OUT" ] || : >"$OUT"
for i in "${!names[@]}"; do
  f=${files[$i]} t0=$SECONDS outcome="" rc=0
  k="${batss[$i]}|${filters[$i]}"
  [ "$BASELINE" = 0 ] || baseline "$i"
  if [ "$BASELINE" = 1 ] && [ "${base[$k]}" != survived ]; then
    outcome=error
  else
    apply "$f" "${finds[$i]}" "${repls[$i]}" || rc=$?
    case $rc in
      0) outcome=$(run_bats "${batss[$i]}" "${filters[$i]}" "$logs/$i") ;;
      1) outcome=stale; echo "stale mutation ${names[$i]}: '${finds[$i]}' is not in $f (update the list)" >&2 ;;
      *) outcome=stale; echo "stale mutation ${names[$i]}: '${finds[$i]}' occurs more than once in $f (make it longer)" >&2 ;;
    esac
    cp "$REPO/$f" "$scratch/$f"   # the next mutation starts from the working tree's file
  fi
  case $outcome in
    killed) killed=$((killed + 1)) ;;
    survived) survived=$((survived + 1)) ;;
    timeout) timedout=$((timedout + 1)) ;;
    stale) stale=$((stale + 1)) ;;
    *) errors=$((errors + 1)) ;;
  esac
  printf '%-9s %4ss  %s  (%s: %s)\n' "$outcome" $((SECONDS - t0)) "${names[$i]}" "$f" "${batss[$i]}"
  if [ "$outcome" = error ] && [ -f "$logs/$i" ]; then tail -n 5 "$logs/$i" | sed 's/^/    /'; fi
  [ -z "$OUT" ] || printf '%s\t%s\t%s\n' "${names[$i]}" "$outcome" $((SECONDS - t0)) >>"$OUT"
done

run=$((killed + survived + timedout))
echo "mutations: ${#names[@]}; killed $killed of $run run$( [ "$run" -eq 0 ] || printf ' (%d%%)' $((100 * killed / run))); survived $survived; timeout $timedout; stale $stale; error $errors"
[ "$stale" -eq 0 ] && [ "$errors" -eq 0 ] || exit 3
[ "$survived" -eq 0 ] && [ "$timedout" -eq 0 ] || exit 1
exit 0
