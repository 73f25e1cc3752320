# shellcheck shell=bash
# runner/lib/vast.sh — every call to the vastai CLI, and how its answers are judged.
#
# The CLI exits 0 even when the API answered an error (the error goes to stderr as JSON under --raw),
# so no exit status is trusted: stdout must parse as the expected JSON shape, anything else is UNKNOWN.
# Return codes of these functions: 0 = known answer, 1 = unknown (error, empty, malformed, timeout),
# 3 = rate limited (429; callers back off on their own, the CLI's retry is short).

# vast_cli OUT ERR ARGS...: run the CLI with a deadline; stdout to OUT, stderr to ERR. The key travels in
# the environment (VAST_API_KEY) or the CLI's key file, never on the command line.
vast_cli() {
  local out=$1 err=$2 rc=0
  shift 2
  # shellcheck disable=SC2086  # RUNNER_VASTAI is a command line by design
  with_timeout "$RUNNER_CLI_TIMEOUT_S" $RUNNER_VASTAI "$@" >"$out" 2>"$err" </dev/null || rc=$?
  log_event "vastai $1 $2 ${3:-} -> rc=$rc"
  return "$rc"
}

# _vast_tmp: a new temp file's path; 1 (said on stderr) when none can be made (TMPDIR missing or full).
_vast_tmp() {
  mktemp "${TMPDIR:-/tmp}/runner.XXXXXX" 2>/dev/null && return 0
  echo "runner: cannot make a temp file under ${TMPDIR:-/tmp} (set TMPDIR to a writable folder)" >&2
  return 1
}

# _vast_judge ERRFILE: after an unknown answer, 3 when the API said 429, else 1.
_vast_judge() {
  if grep -q '"status_code": *429' "$1" 2>/dev/null || grep -q 'error 429' "$1" 2>/dev/null; then
    return 3
  fi
  return 1
}

# vast_list OUT: every instance of the account, one TSV row each:
#   id  status  label  dph_total  ssh_host  ssh_port  start_date
# Pages through /api/v1/instances/ itself (single-page mode keeps the page envelope, so `{}`, null,
# an error object or a page without an "instances" array is UNKNOWN, never "no instances").
# Others' creates and destroys between two pages change the account's total_instances: the listing
# is then taken again from its first page, up to RUNNER_LIST_TRIES times; when the total still moves,
# the rows gathered are kept and OUT.partial is written beside OUT: every row shown is real, but an
# absence proves nothing (gone_judge in runner/lib/gone.sh asks `show instance` instead). Pages that
# agree on a total the rows gathered do not match are UNKNOWN (1). OUT.at holds when the pass that
# made OUT asked its first page (epoch s, list_taken_at): a box that landed later may be missing.
# Callers remove OUT with list_rm.
: "${RUNNER_LIST_TRIES:=3}"
vast_list() {
  local dest=$1 try=0 rc
  rm -f "$dest.partial" "$dest.at"
  while :; do
    try=$((try + 1))
    rc=0
    now >"$dest.at" 2>/dev/null || rm -f "$dest.at"   # unwritten: the listing's time is unknown
    _vast_list_once "$dest" || rc=$?
    [ "$rc" = 4 ] || return "$rc"
    if [ "$try" -ge "$RUNNER_LIST_TRIES" ]; then
      log_event "listing: the account's total changed while paging, $try times: rows kept, absences unknown"
      : >"$dest.partial" 2>/dev/null || { rm -f "$dest"; return 1; }
      return 0
    fi
    log_event "listing: the account's total changed while paging: listing again"
  done
}

# list_rm LISTFILE: remove a listing, its .partial marker and its time.
list_rm() { rm -f "$1" "$1.partial" "$1.at"; }

# list_taken_at LISTFILE: when vast_list asked the listing's first page (epoch s); nothing when unknown.
list_taken_at() {
  local t
  t=$(cat "$1.at" 2>/dev/null) || t=""
  if is_number "$t"; then printf '%s\n' "$t"; fi
}

# _vast_list_once OUT: one pass over the pages. 0 = complete (OUT written), 1 unknown, 3 rate
# limited, 4 the total changed between pages (OUT holds the rows gathered).
_vast_list_once() {
  local dest=$1 token="" page=0 out err rows total="" t moved=0
  out=$(_vast_tmp) || return 1
  err=$(_vast_tmp) || return 1
  rows=$(_vast_tmp) || return 1
  while :; do
    page=$((page + 1))
    if [ "$page" -gt 400 ]; then rm -f "$out" "$err" "$rows"; return 1; fi
    if [ -n "$token" ]; then
      vast_cli "$out" "$err" show instances --raw --limit 25 --next-token "$token" || true
    else
      vast_cli "$out" "$err" show instances --raw --limit 25 || true
    fi
    # -s: exactly one JSON value (jq 1.6 -e exits 0 on empty input, so emptiness is checked this way)
    if ! jq -e -s 'length == 1 and (.[0] | type == "object" and (.instances | type == "array")
               and all(.instances[]; type == "object" and (.id | type == "number"))
               and ((.next_token // "") | type == "string"))' "$out" >/dev/null 2>&1; then
      local rc=1
      _vast_judge "$err" || rc=$?
      rm -f "$out" "$err" "$rows"
      return "$rc"
    fi
    # Every row of the page must come out (a failed extraction must not look like "fewer instances").
    local page_rows want got
    page_rows=$(_vast_tmp) || return 1
    want=$(jq '.instances | length' "$out" 2>/dev/null || echo x)
    if ! jq -r '.instances[] | [(.id | tostring), (.actual_status // "unknown" | tostring),
             (.label // "" | tostring), (.dph_total // "" | tostring), (.ssh_host // "" | tostring),
             (.ssh_port // "" | tostring), (.start_date // "" | tostring)] | @tsv' "$out" >"$page_rows" 2>/dev/null; then
      want=x
    fi
    got=$(awk 'END { print NR }' "$page_rows")
    cat "$page_rows" >>"$rows"
    rm -f "$page_rows"
    if [ "$want" != "$got" ]; then
      log_event "listing page unreadable (want $want rows, got $got): unknown"
      rm -f "$out" "$err" "$rows"
      return 1
    fi
    t=$(jq -r '.total_instances // "" | tostring' "$out" 2>/dev/null || true)
    if [ "$page" = 1 ]; then
      total=$t
    elif is_number "$t" && is_number "$total" && [ "$t" != "$total" ]; then
      moved=1
    fi
    token=$(jq -r '.next_token // ""' "$out")
    [ -n "$token" ] || break
  done
  # Pages that disagree on total_instances: the account changed while paging (4). Otherwise the
  # total (when the API gives it) must match the rows gathered, else the listing is unreadable (1).
  rm -f "$out" "$err"
  if [ "$moved" = 1 ]; then mv "$rows" "$dest"; return 4; fi
  if is_number "${total:-}" && [ "$total" != "$(awk 'END { print NR }' "$rows")" ]; then
    log_event "listing total $total != rows gathered: unknown"
    rm -f "$rows"
    return 1
  fi
  mv "$rows" "$dest"
}

# list_has LISTFILE ID: the instance is in a successful listing.
list_has() { awk -F '\t' -v id="$2" '$1 == id { found = 1 } END { exit !found }' "$1"; }

# list_field LISTFILE ID COLUMN(1-based): one field of one instance.
list_field() { awk -F '\t' -v id="$2" -v c="$3" '$1 == id { print $c; exit }' "$1"; }

# list_dph LISTFILE ID FALLBACK: the $/h the listing says the instance bills (its dph_total, the number
# `show instance` reads back after a create), else FALLBACK. A box found by its label (a create that
# answered badly, a duplicate) gets its ledger row at its own bill, never at the search's price.
list_dph() {
  local v
  v=$(list_field "$1" "$2" 4)
  if is_number "$v"; then printf '%s\n' "$v"; else printf '%s\n' "$3"; fi
}

# list_by_label LISTFILE LABEL: ids carrying exactly that label.
list_by_label() { awk -F '\t' -v l="$2" '$3 == l { print $1 }' "$1"; }

# vast_show_gone ID: a direct query (`show instance ID --raw`, GET /api/v0/instances/ID/) answers
# exactly {"instances": null}: the account holds no such instance. 0 = gone; 1 = listed, or an
# answer that proves nothing (error, empty, `{}`, a traceback, a timeout). What a listing that lacks
# a live job's box is checked against: an API hiccup can serve a well-formed empty listing.
vast_show_gone() {
  local out err rc=1
  case $1 in '' | *[!0-9]*) return 1 ;; esac
  out=$(_vast_tmp) || return 1
  err=$(_vast_tmp) || return 1
  vast_cli "$out" "$err" show instance "$1" --raw || true
  if jq -e -s 'length == 1 and .[0] == {"instances": null}' "$out" >/dev/null 2>&1; then rc=0; fi
  rm -f "$out" "$err"
  return "$rc"
}

# vast_show_dph ID: the $/h the instance bills (`show instance ID --raw`: its dph_total, priced at its
# disk), read back after the create: the search's price is the offer's, not the bill. 1 = no number.
vast_show_dph() {
  local out err v
  case $1 in '' | *[!0-9]*) return 1 ;; esac
  out=$(_vast_tmp) || return 1
  err=$(_vast_tmp) || return 1
  vast_cli "$out" "$err" show instance "$1" --raw || true
  # the CLI prints the instance itself (the API's {"instances": {...}} unwrapped); either is read
  v=$(jq -r 'if type == "object" then (if (.instances | type) == "object" then .instances else . end)
             | .dph_total | select(type == "number") else empty end' "$out" 2>/dev/null || true)
  rm -f "$out" "$err"
  [ -n "$v" ] || return 1
  printf '%s\n' "$v"
}

# vast_credit: print the account's credit (dollars) from `show user --raw`.
vast_credit() {
  local out err v rc=0
  out=$(_vast_tmp) || return 1
  err=$(_vast_tmp) || return 1
  vast_cli "$out" "$err" show user --raw || true
  v=$(jq -r 'if type == "object" and (.credit | type == "number") then .credit else empty end' \
    "$out" 2>/dev/null || true)
  if [ -z "$v" ]; then _vast_judge "$err" || rc=$?; fi
  rm -f "$out" "$err"
  [ -n "$v" ] || return "$rc"
  printf '%s\n' "$v"
}

# vast_offer_count FLOOR MAX_DPH: how many offers match RUNNER_OFFER_QUERY (plus FLOOR, e.g.
# `cuda_max_good>=13.0`, or nothing when FLOOR is empty) with dph_total at most MAX_DPH, counted in
# one page of at most VAST_OFFER_COUNT_LIMIT (500) rows: a count equal to the limit means "at least".
# 1 = no valid answer (unknown, never 0). The launcher searches with and without the CUDA floor to
# say how many offers the floor excludes.
VAST_OFFER_COUNT_LIMIT=500
vast_offer_count() {
  local out err v
  out=$(_vast_tmp) || return 1
  err=$(_vast_tmp) || return 1
  vast_cli "$out" "$err" search offers "$RUNNER_OFFER_QUERY${1:+ $1} dph_total<=$2" --order "$RUNNER_OFFER_ORDER" \
    --storage "$RUNNER_DISK_GB" --limit "$VAST_OFFER_COUNT_LIMIT" --raw || true
  v=$(jq -r 'if type == "array" then length else empty end' "$out" 2>/dev/null || true)
  rm -f "$out" "$err"
  [ -n "$v" ] || return 1
  printf '%s\n' "$v"
}

# vast_offer CUDA MAX_DPH: the first offer matching RUNNER_OFFER_QUERY whose host driver supports CUDA
# (MAJOR.MINOR; vast.ai's cuda_max_good is the newest CUDA the host's driver runs) and whose
# dph_total is at most MAX_DPH ($/h), as one line of fields separated by `|`:
#   id|dph_total|gpu_name|cpu_cores_effective|cuda_max_good|matched
# (the middle three as the offer gives them, `,` `|` tabs and newlines turned to spaces, cuda_max_good
# as MAJOR.MINOR: they go into the ledger; empty when the offer lacks one; matched: how many offers
# the answer held, at most VAST_OFFER_COUNT_LIMIT, the count cuda_floor_excludes compares).
# 2 = a valid answer with no such offer (stdout then "0", the count).
vast_offer() {
  local out err v rc=0
  out=$(_vast_tmp) || return 1
  err=$(_vast_tmp) || return 1
  vast_cli "$out" "$err" search offers "$RUNNER_OFFER_QUERY cuda_max_good>=$1 dph_total<=$2" --order "$RUNNER_OFFER_ORDER" \
    --storage "$RUNNER_DISK_GB" --limit "$VAST_OFFER_COUNT_LIMIT" --raw || true
  v=$(jq -r 'def f: if . == null then "" else tostring | gsub("[,|\t\n]"; " ") end;
      if type == "array" then length as $n |
        [.[] | select((.id | type == "number") and (.dph_total | type == "number"))][0]
        | select(. != null)
        | [(.id | tostring), (.dph_total | tostring), (.gpu_name | f), (.cpu_cores_effective | f),
           (.cuda_max_good | if type == "number" then tostring | if test("[.]") then . else . + ".0" end else f end),
           ($n | tostring)]
        | join("|") else empty end' "$out" 2>/dev/null || true)
  if [ -z "$v" ]; then
    if jq -e -s 'length == 1 and (.[0] | type == "array")' "$out" >/dev/null 2>&1; then rc=2; v=0; else _vast_judge "$err" || rc=$?; fi
  fi
  rm -f "$out" "$err"
  [ -n "$v" ] || return "$rc"
  printf '%s\n' "$v"
  return "$rc"
}

# vast_create OFFER LABEL ENVSTRING [ONSTART]: print the new instance id; 1 when the answer is not a clear
# success (the caller must then look for the label: a failed create can still have created an
# instance). ONSTART, when given, is the instance's on-start command (--onstart-cmd).
vast_create() {
  local out err v
  local -a onstart=()
  [ -z "${4:-}" ] || onstart=(--onstart-cmd "$4")
  out=$(_vast_tmp) || return 1
  err=$(_vast_tmp) || return 1
  vast_cli "$out" "$err" create instance "$1" --image "$RUNNER_IMAGE" --disk "$RUNNER_DISK_GB" \
    --label "$2" --ssh --direct --env "$3" ${onstart[@]+"${onstart[@]}"} --raw || true
  v=$(jq -r 'if type == "object" and .success == true and (.new_contract | type == "number")
             then .new_contract else empty end' "$out" 2>/dev/null || true)
  rm -f "$out" "$err"
  [ -n "$v" ] || return 1
  printf '%s\n' "$v"
}

# vast_destroy ID: ask once (with -y: without it the CLI prints "Aborted." and exits 0). Its answer
# is ignored on purpose: only a later listing without the instance confirms anything.
vast_destroy() {
  local out err
  out=$(_vast_tmp) || return 1
  err=$(_vast_tmp) || return 1
  vast_cli "$out" "$err" destroy instance "$1" -y --raw || true
  rm -f "$out" "$err"
}
