# Sourced by the first-start experiments: `new_model SRC DEST` copies the model folder SRC to
# DEST with one field added to its config.json, so that its content hash is new and no shipped
# or cached profile fits it (a model Morph has never seen, as a user's own would be).
new_model() {
  cp -r "$1" "$2"
  python3 - "$2/config.json" "$0" <<'PY'
import json, sys
config = json.load(open(sys.argv[1]))
config["_copied_for"] = sys.argv[2]
json.dump(config, open(sys.argv[1], "w"), indent=2)
PY
}
