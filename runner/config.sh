# shellcheck shell=bash
# runner/config.sh — the runner's one configuration file.
#
# Every setting is `: "${NAME:=default}"`, so an environment variable of the same name overrides it
# (tests run the whole runner against a fake API and a local "box" that way). Sourced by runner/lib/common.sh;
# RUNNER_CONFIG=/path/to/other.sh is sourced after this file for a site's own values.
# Times are seconds unless the name says _H (hours); money is US dollars.

# --- vast.ai -------------------------------------------------------------------------------------------
# VAST_URL: the API base the vastai CLI talks to (unset = the CLI's own default, the real service).
# VAST_API_KEY: the key; when unset the CLI's own key file (~/.config/vastai/vast_api_key) is used.
: "${RUNNER_VASTAI:=vastai}"                 # the vastai CLI (PyPI vastai 1.9.1), word-split
: "${RUNNER_CLI_TIMEOUT_S:=60}"              # one CLI call longer than this counts as "unknown"
: "${RUNNER_IMAGE:=PLACEHOLDER_TRAINER_IMAGE_DIGEST}"  # registry/name@sha256:… from the Nix image's push
: "${RUNNER_DISK_GB:=80}"                    # --disk; dph_total is priced at this size
# The default offer: one A100 SXM4 (vast.ai's gpu_name "A100 SXM4"; `_` stands for the space in a
# query), at least 32 vCPUs of the host for this rental (cpu_cores_effective: the on-box codec pass
# and the data loaders run on them), host reliability above 0.98, at least 500 Mb/s down (the bundle
# pull) and a direct port (ssh). The runner adds two floors of its own (below): the driver's CUDA
# and the price ceiling.
: "${RUNNER_OFFER_QUERY:=num_gpus=1 gpu_name=A100_SXM4 cpu_cores_effective>=32 reliability>0.98 inet_down>=500 direct_port_count>=1}"
: "${RUNNER_OFFER_ORDER:=dph_total}"         # cheapest first
# The price ceiling, $/h: the runner adds `dph_total<=RUNNER_OFFER_MAX_DPH` to the query (dph_total is
# priced at RUNNER_DISK_GB), and checks it again against what the new instance bills (`show instance`,
# its contract's dph): above it, the box is destroyed (launch.sh exit 17). A limit of the operator's choosing,
# not a market figure: raise it deliberately when no offer matches (launch.sh exit 8 says so).
: "${RUNNER_OFFER_MAX_DPH:=1.50}"
: "${RUNNER_LABEL_PREFIX:=hearsay}"          # instance label = PREFIX.OPERATOR:JOB:GEN:DEADLINE (state.sh)

# The runner adds `cuda_max_good>=X.Y` to RUNNER_OFFER_QUERY: X.Y is the CUDA of this lock's
# nvidia-cuda-runtime pin (runner/lib/cuda.sh), so a host whose driver cannot run the image's torch
# is never rented. Written nowhere else.
: "${RUNNER_LOCK:=${RUNNER_ROOT}/../requirements.lock}"

# --- money --------------------------------------------------------------------------------------------
: "${RUNNER_MARGIN_USD:=1.50}"               # credit must exceed estimate + commitments + this
: "${RUNNER_HOURS_PILOT:=3}"                 # estimated hours per job kind (budget estimate)
: "${RUNNER_HOURS_FOLD:=4}"
: "${RUNNER_HOURS_FULL:=5}"
: "${RUNNER_HOURS_PROBE:=0.25}"
: "${RUNNER_HOURS_ABLATION:=0.5}"            # one ablation rental (runner/launch.sh ablate); its most: x FACTOR
: "${RUNNER_ABLATION_GPU_HOURS:=2}"          # cap on all ablation rentals' GPU-hours (ledger: spent + open at most)
: "${RUNNER_DEADLINE_FACTOR:=1.5}"           # reaper destroys at created + FACTOR * estimated hours
: "${RUNNER_UNKNOWN_COMMIT_H:=1}"            # hours charged to a listed instance with no record of ours

# --- the campaign's hard stop ---------------------------------------------------------------------
# RUNNER_CAMPAIGN_DEADLINE: an absolute time, epoch seconds (10 digits, e.g. 1796500800) or ISO-8601
# UTC (2026-12-05T20:00:00Z, the same time; or without seconds: 2026-12-05T20:00Z); empty = none. Past it
# runner/launch.sh refuses (exit 16) and runner/reaper.sh ends every box of this RUNNER_STATE
# (runner/lib/campaign.sh); each box is told it at its create, so it ends itself there too.
: "${RUNNER_CAMPAIGN_DEADLINE:=}"
# The final push's grace, s: at its deadline (the job's or the campaign's) a box stops its trainer and
# pushes its checkpoints; its own watchdog and on-start guard, and the reaper, wait this long past the
# deadline (unless the box reports its end first). Written into each job's contract at launch
# (runner/lib/contract.sh): a later change reaches only later launches. RUNNER_CAMPAIGN_GRACE_S is its
# older name.
: "${RUNNER_FINAL_PUSH_GRACE_S:=${RUNNER_CAMPAIGN_GRACE_S:-720}}"

# --- timing -------------------------------------------------------------------------------------------
: "${RUNNER_BOOT_DEADLINE_S:=900}"           # created -> running, else destroy
: "${RUNNER_CHAIN_DEADLINE_S:=300}"          # ssh start -> chain confirmed running, else destroy
: "${RUNNER_PROVISION_SLACK_S:=60}"         # a box with no chain by create + BOOT_DEADLINE + 3 x SSH_TIMEOUT + this ends itself
: "${RUNNER_POLL_S:=10}"                     # launcher's poll interval
: "${RUNNER_DESTROY_TRIES:=5}"               # destroy calls before a box is recorded ORPHAN
: "${RUNNER_CONFIRM_CHECKS:=6}"              # listings per destroy call (the listing lags)
: "${RUNNER_CONFIRM_WAIT_S:=5}"              # seconds between those listings
: "${RUNNER_LABEL_LAG_S:=120}"               # how long a create that answered badly is searched for
: "${RUNNER_LAUNCH_WAIT_S:=900}"            # a launch waits this long for another launch's budget+create
: "${RUNNER_LOCK_STALE_S:=30}"              # a lock with no readable owner older than this is broken
: "${RUNNER_REAPER_MODE:=start}"            # no live reaper at launch: start (one) | refuse (exit 13) | off
: "${RUNNER_ORPHAN_GRACE_S:=600}"           # an instance labelled by this state's operator, with no record, is destroyed after this
: "${RUNNER_HOLD_TTL_S:=900}"                # a HOLD older than this is stale (15 min)
: "${RUNNER_REAPER_POLL_S:=60}"              # reaper's quiet poll interval
: "${RUNNER_REAPER_MAX_BACKOFF_S:=900}"      # reaper's longest wait after 429s / failed listings
: "${RUNNER_REAPER_JOB_BACKOFF_S:=300}"      # longest wait before retrying one job that keeps failing
: "${RUNNER_HEARTBEAT_S:=60}"                # the box's chain writes RUN_PATH/HEARTBEAT this often (job.env)
: "${RUNNER_HEARTBEAT_STALE_S:=900}"         # a PROVISIONED box whose heartbeat shows no progress this long is ended (0 = never)
# Whether RUNNER_IMAGE writes HEARTBEAT (its chain's box_heartbeat; images built before it do not):
# yes | no. A launch refuses "no" unless --no-heartbeat says so; such a box is judged by its STATUS
# and deadline only, and a missing heartbeat never ends a box (runner/lib/judge.sh).
: "${RUNNER_IMAGE_BEATS:=yes}"

# --- local files --------------------------------------------------------------------------------------
: "${RUNNER_STATE:=${XDG_STATE_HOME:-$HOME/.local/state}/hearsay-runner}"  # job records, HOLDs, logs
: "${LEDGER:=${RUNNER_ROOT}/../docs/ledger.csv}"  # one row per rental
: "${RUNNER_RECORD_RESERVE_KB:=64}"         # KiB of ballast per job record, freed as it ends: its teardown's room on a full disk

# --- the box ------------------------------------------------------------------------------------------
# RUNNER_SSH is called like ssh: `$RUNNER_SSH -p PORT root@HOST 'remote command'`, secrets on stdin.
: "${RUNNER_SSH:=ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new -o ConnectTimeout=20}"
: "${RUNNER_SSH_TIMEOUT_S:=120}"             # one ssh call longer than this fails
: "${RUNNER_RCLONE:=rclone}"                 # word-split; the local rclone (store STATUS reads)
: "${RUNNER_RCLONE_CONF:=${XDG_CONFIG_HOME:-$HOME/.config}/hearsay/rclone.conf}"  # mode 600, the store's secrets
: "${RUNNER_STORE:=store:hearsay}"           # remote:path every remote path must live under (the guard)
: "${RUNNER_OPERATOR:=}"                     # runs go to RUNNER_STORE/runs/OPERATOR/JOB; empty: this RUNNER_STATE's identity
: "${RUNNER_SWEEP_MAX_MB:=64}"              # runner/secrets_sweep.sh reads run-folder files up to this size, MiB (checkpoints: counted, not read)
: "${RUNNER_SWEEP_TIMEOUT_S:=900}"          # one rclone call of the sweep (listing, or copying the run folders) longer than this: "unreadable"
: "${RUNNER_BOX_DIR:=/run/hearsay}"          # on the box: job.env, train.json, rclone.conf (600), CHAIN, logs
: "${RUNNER_BOX_ENTRY:=/opt/hearsay/runner/box/entry.sh}"  # on the box: the chain
: "${RUNNER_BOX_ONSTART:=/opt/hearsay/runner/box/onstart.sh}"  # on the box: its on-start guard (deadline from its first second)
: "${RUNNER_BOX_TRAIN:=hearsay train}"       # on the box: the trainer command (word-split there)

# --- identity of what a job trains (pilot gate) -------------------------------------------------------
: "${RUNNER_BUNDLE_META:=bundle/bundle_meta.json}"  # local copy of the bundle's meta: its tree_sha
: "${RUNNER_TRAIN_CONFIG:=${RUNNER_ROOT}/../configs/train.json}"  # `hearsay train --config` JSON:
#   its sha256 is the config hash; its exact bytes go to the box as BOX_DIR/train.json (not for probe);
#   without train.epochs it is the recipe the pilot gate keys on (runner/lib/recipe.sh)
: "${RUNNER_RECIPES:=${RUNNER_ROOT}/../configs/recipes}"  # ablation recipes: NAME.json, a training config each

# A site file (RUNNER_CONFIG) may set any of the above.
if [ -n "${RUNNER_CONFIG:-}" ]; then
  # shellcheck source=/dev/null
  . "$RUNNER_CONFIG"
fi
