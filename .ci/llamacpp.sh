#!/usr/bin/env bash
# llama.cpp's own `llama-server` for the compatibility suite (tests/llamacpp.rs).
#
# Sourced by .ci/run:   source .ci/llamacpp.sh && ragloop_llamacpp_up
# Run by hand:          .ci/llamacpp.sh cargo test --test integration llamacpp::
#                       (servers up, the command run with the variables set, servers
#                       stopped at exit)
#
# 1. Builds llama-server once, with ../shared/compat/llamacpp/recipe.sh (relative to the
#    repo root: CI clones the repo with shared/ beside it), into
#    ${RAGLOOP_CI_CACHE:-$HOME/.cache/ragloop-ci}/llamacpp-<llama-cpp-python version>.
#    ($RAGLOOP_LLAMACPP_RECIPE names another copy, e.g. from a git worktree.)
#    A build that finished has a `.complete` marker; a directory without one (a killed
#    build) is removed and built again. The version comes from the package registry
#    (`pip index versions`); without the registry the newest complete cached build is
#    used, so a machine that ran CI before needs neither the network nor a build.
# 2. Makes the two tiny random-weight models with the recipe's make_model.py
#    (models/tool.gguf: opens every turn with a tool call; models/prose.gguf: answers
#    one character unless a grammar forces JSON).
# 3. Starts three servers on free 127.0.0.1 ports (tool, prose, and prose with
#    --embeddings --pooling mean), waits for /health, and exports
#      RAGLOOP_LLAMACPP_TOOL_URL, RAGLOOP_LLAMACPP_PROSE_URL, RAGLOOP_LLAMACPP_EMBED_URL
#        (base URLs ending in /v1),
#      RAGLOOP_LLAMACPP_BIN (the llama-server binary), RAGLOOP_LLAMACPP_MODELS (the
#        models directory), and LD_LIBRARY_PATH (the build links its shared libraries
#        by absolute path, which a moved or restored cache breaks).
#    The servers are stopped, by PID, when the shell exits (trap EXIT).
#
# ragloop_llamacpp_up returns 0 when the servers are up, 1 when llama-server could be
# built but a server did not start (a real failure: the suite must then fail), and 2
# when the build is impossible here (no recipe, no registry and no cache, no compiler),
# after printing why.

ragloop_llamacpp_log() { echo "llamacpp: $*" >&2; }

# A free TCP port on 127.0.0.1 (bound then released).
ragloop_llamacpp_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# The latest llama-cpp-python version on the registry, or nothing.
ragloop_llamacpp_registry_version() {
  timeout 60 python3 -m pip index versions llama-cpp-python 2>/dev/null \
    | sed -n 's/^llama-cpp-python (\([^)]*\)).*/\1/p' | head -n1
}

# Builds (or finds) llama-server; prints the build directory on stdout.
ragloop_llamacpp_build() {
  local repo cache recipe version dir partial port src actual
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  cache=${RAGLOOP_CI_CACHE:-$HOME/.cache/ragloop-ci}
  recipe=${RAGLOOP_LLAMACPP_RECIPE:-$repo/../shared/compat/llamacpp/recipe.sh}
  mkdir -p "$cache" || return 2
  version=$(ragloop_llamacpp_registry_version)
  if [ -z "$version" ]; then
    # No registry: the newest complete build in the cache, if any.
    dir=$(ls -d "$cache"/llamacpp-*/.complete 2>/dev/null | sort -V | tail -n1)
    if [ -n "$dir" ]; then
      ragloop_llamacpp_log "package registry not reachable; using the cached build $(dirname "$dir")"
      dirname "$dir"
      return 0
    fi
    ragloop_llamacpp_log "package registry not reachable and no cached build in $cache"
    return 2
  fi
  dir="$cache/llamacpp-$version"
  if [ -f "$dir/.complete" ]; then
    ragloop_llamacpp_log "llama-cpp-python $version: cached build $dir"
    echo "$dir"
    return 0
  fi
  [ -f "$recipe" ] || { ragloop_llamacpp_log "no recipe at $recipe (shared/ is not beside the repo)"; return 2; }
  command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 \
    || { ragloop_llamacpp_log "no C++ compiler"; return 2; }
  python3 -m venv --help >/dev/null 2>&1 || { ragloop_llamacpp_log "python3 has no venv module"; return 2; }
  partial="$cache/.llamacpp-$version.partial-$$"
  rm -rf "$dir" "$partial"
  port=$(ragloop_llamacpp_port) || return 2
  ragloop_llamacpp_log "building llama-server from llama-cpp-python $version into $dir (about 5 minutes on 2 cores; log: $partial.log)"
  # The recipe ends by starting a server (MODE tool) on $port: stopped right after.
  if ! bash "$recipe" "$partial" "$port" tool >"$partial.log" 2>&1; then
    [ -f "$partial/server.pid" ] && kill "$(cat "$partial/server.pid")" 2>/dev/null
    tail -n 20 "$partial.log" >&2
    ragloop_llamacpp_log "the build failed (see $partial.log)"
    return 2
  fi
  [ -f "$partial/server.pid" ] && kill "$(cat "$partial/server.pid")" 2>/dev/null
  tail -n 1 "$partial.log" >&2
  # The registry may have moved on between the version query and the download.
  src=$(ls -d "$partial"/src/llama_cpp_python-*/ 2>/dev/null | head -n1)
  actual=$(basename "$src"); actual=${actual#llama_cpp_python-}
  [ -n "$actual" ] && dir="$cache/llamacpp-$actual"
  rm -rf "$dir"
  mv "$partial" "$dir" && mv "$partial.log" "$dir/build-recipe.log" || return 2
  touch "$dir/.complete"
  echo "$dir"
}

# Starts one server; sets REPLY to its PID. Arguments: name, port, then llama-server
# options.
ragloop_llamacpp_start() {
  local name=$1 port=$2
  shift 2
  nohup "$RAGLOOP_LLAMACPP_BIN" --host 127.0.0.1 --port "$port" "$@" \
    >"$RAGLOOP_LLAMACPP_LOGS/$name.log" 2>&1 &
  REPLY=$!
  RAGLOOP_LLAMACPP_PIDS="${RAGLOOP_LLAMACPP_PIDS:-} $REPLY"
}

ragloop_llamacpp_wait() {
  local name=$1 port=$2 pid=$3 _
  for _ in $(seq 120); do
    if curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1; then return 0; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  ragloop_llamacpp_log "the $name server did not come up on port $port:"
  tail -n 15 "$RAGLOOP_LLAMACPP_LOGS/$name.log" >&2
  return 1
}

ragloop_llamacpp_down() {
  local pid
  for pid in ${RAGLOOP_LLAMACPP_PIDS:-}; do kill "$pid" 2>/dev/null; done
  RAGLOOP_LLAMACPP_PIDS=""
}

ragloop_llamacpp_up() {
  local dir lc bin models port_tool port_prose port_embed pid_tool pid_prose pid_embed rc=0
  dir=$(ragloop_llamacpp_build) || return $?
  lc=$(ls -d "$dir"/src/llama_cpp_python-*/vendor/llama.cpp 2>/dev/null | head -n1)
  bin="$lc/build/bin/llama-server"
  [ -x "$bin" ] || { ragloop_llamacpp_log "no llama-server in $dir"; return 1; }
  export LD_LIBRARY_PATH="$lc/build/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  models="$dir/models"
  mkdir -p "$models"
  local mode
  for mode in tool prose; do
    if [ ! -s "$models/$mode.gguf" ]; then
      PYTHONPATH="$lc/gguf-py" "$dir/venv/bin/python" "$dir/make_model.py" \
        "$lc/models/ggml-vocab-qwen2.gguf" "$lc/models/templates/Qwen-Qwen2.5-7B-Instruct.jinja" \
        "$models/$mode.gguf.tmp" "$mode" >/dev/null \
        && mv "$models/$mode.gguf.tmp" "$models/$mode.gguf" \
        || { ragloop_llamacpp_log "make_model.py $mode failed"; return 1; }
    fi
  done
  export RAGLOOP_LLAMACPP_BIN="$bin" RAGLOOP_LLAMACPP_MODELS="$models"
  RAGLOOP_LLAMACPP_LOGS=$(mktemp -d "${TMPDIR:-/tmp}/ragloop-llamacpp.XXXXXX")
  trap ragloop_llamacpp_down EXIT
  port_tool=$(ragloop_llamacpp_port) && port_prose=$(ragloop_llamacpp_port) \
    && port_embed=$(ragloop_llamacpp_port) || return 1
  # -np 4 slots of 4096 tokens; -n 256 caps a reply when the request sets no max_tokens.
  ragloop_llamacpp_start tool "$port_tool" -m "$models/tool.gguf" --jinja -c 16384 -np 4 -n 256 -t 2
  pid_tool=$REPLY
  ragloop_llamacpp_start prose "$port_prose" -m "$models/prose.gguf" --jinja -c 16384 -np 4 -n 256 -t 2
  pid_prose=$REPLY
  # One slot for embeddings: with several, llama-server (0c1e570) batches a request's
  # inputs together and a decoder model's vector of the longer texts then depends on
  # their neighbours (cosine 0.74-0.90 to the same text embedded alone).
  ragloop_llamacpp_start embed "$port_embed" -m "$models/prose.gguf" --embeddings --pooling mean -c 2048 -np 1 -b 2048 -ub 2048 -t 2
  pid_embed=$REPLY
  ragloop_llamacpp_wait tool "$port_tool" "$pid_tool" \
    && export RAGLOOP_LLAMACPP_TOOL_URL="http://127.0.0.1:$port_tool/v1" || rc=1
  ragloop_llamacpp_wait prose "$port_prose" "$pid_prose" \
    && export RAGLOOP_LLAMACPP_PROSE_URL="http://127.0.0.1:$port_prose/v1" || rc=1
  ragloop_llamacpp_wait embed "$port_embed" "$pid_embed" \
    && export RAGLOOP_LLAMACPP_EMBED_URL="http://127.0.0.1:$port_embed/v1" || rc=1
  ragloop_llamacpp_log "servers: tool ${RAGLOOP_LLAMACPP_TOOL_URL:-down}, prose ${RAGLOOP_LLAMACPP_PROSE_URL:-down}, embeddings ${RAGLOOP_LLAMACPP_EMBED_URL:-down} (logs in $RAGLOOP_LLAMACPP_LOGS)"
  return $rc
}

# Run directly: bring the servers up, run the command, stop them.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  ragloop_llamacpp_up
  rc=$?
  if [ $rc -ne 0 ]; then exit $rc; fi
  export RAGLOOP_REQUIRE_LLAMACPP=1
  if [ $# -gt 0 ]; then "$@"; else
    echo "servers up; press Ctrl-C to stop them"; wait
  fi
fi
