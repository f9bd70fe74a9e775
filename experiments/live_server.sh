# Sourced by the live experiments: builds morph, gives a scratch folder $tmp, and `serve ARGS`
# starts `morph serve --port 0 ARGS` in the background and sets $url once it listens; `stop`
# (also run on exit) stops it with SIGTERM and waits for it.
cargo build --release -q -p morph-cli
bin=target/release/morph
tmp=$(mktemp -d)
server=
stop() { [ -n "$server" ] && kill -TERM "$server" 2>/dev/null && wait "$server" 2>/dev/null; server=; }
trap 'stop; rm -rf "$tmp"' EXIT
serve() {
  "$bin" serve --port 0 "$@" >"$tmp/serve.out" 2>"$tmp/serve.err" &
  server=$!
  for _ in $(seq 600); do grep -q listening "$tmp/serve.out" 2>/dev/null && break; sleep 0.1; done
  url=$(sed -n 's/^morph listening on //p' "$tmp/serve.out")
  [ -n "$url" ] || { echo "morph serve did not start:" >&2; cat "$tmp/serve.err" >&2; exit 1; }
}
