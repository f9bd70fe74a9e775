# Sourced by the live experiments: builds morph (or takes $MORPH_BIN, a prebuilt one, on a host
# without cargo), gives a scratch folder $tmp, and `serve ARGS` starts `morph serve --port 0
# ARGS` in the background (under the command prefix in the array $launch, if any: taskset, say)
# and sets $url once it listens; `stop` (also run on exit) stops it with SIGTERM and waits for it.
# `await_line PATTERN NAME` waits (up to a minute) for the server started in the background to
# print PATTERN, else shows its output and exits.
if [ -n "${MORPH_BIN:-}" ]; then
  bin=$MORPH_BIN
else
  cargo build --release -q -p morph-cli
  bin=target/release/morph
fi
tmp=$(mktemp -d)
server=
launch=()
stop() { [ -n "$server" ] && kill -TERM "$server" 2>/dev/null && wait "$server" 2>/dev/null; server=; }
trap 'stop; rm -rf "$tmp"' EXIT
await_line() {
  for _ in $(seq 600); do grep -q "$1" "$tmp/serve.out" 2>/dev/null && return; sleep 0.1; done
  echo "$2 did not start:" >&2; cat "$tmp/serve.out" "$tmp/serve.err" >&2; exit 1
}
serve() {
  "${launch[@]}" "$bin" serve --port 0 "$@" >"$tmp/serve.out" 2>"$tmp/serve.err" &
  server=$!
  await_line listening "morph serve"
  url=$(sed -n 's/^morph listening on //p' "$tmp/serve.out")
}
