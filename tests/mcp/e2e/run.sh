#!/bin/sh
# kf mcp driven by the official MCP TypeScript SDK (ctest McpSdkE2E): npm package @modelcontextprotocol/sdk,
# installed on first use into BUILD/mcp-e2e/node (never committed), runs `kf mcp` over stdio as a coding agent's
# client does (client.mjs): initialize, tools/list, build_and_test on the test task, a second call on a changed
# candidate (the first is its parent), get_result, and a cancelled call (its job CANCELED).
# Prints "kf-e2e-skip: <why>" and exits 0 (ctest: skipped) when node/npm or the package are unavailable.
#   run.sh BUILD_DIR SOURCE_DIR
set -eu
BIN=$1
SRC=$2
OUT=$BIN/mcp-e2e
SDK_VERSION=1.32.2
mkdir -p "$OUT"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then echo "kf-e2e-skip: no node/npm"; exit 0; fi
NODE_DIR=$OUT/node
SDK=$NODE_DIR/node_modules/@modelcontextprotocol/sdk
if ! grep -q "\"version\": \"$SDK_VERSION\"" "$SDK/package.json" 2>/dev/null; then
  mkdir -p "$NODE_DIR"
  [ -f "$NODE_DIR/package.json" ] || echo '{"private": true, "type": "module"}' > "$NODE_DIR/package.json"
  if ! (cd "$NODE_DIR" && timeout 300 npm install --no-audit --no-fund --no-save \
          "@modelcontextprotocol/sdk@$SDK_VERSION" > "$OUT/npm.log" 2>&1); then
    echo "kf-e2e-skip: npm install @modelcontextprotocol/sdk@$SDK_VERSION failed (offline?); see $OUT/npm.log"
    tail -5 "$OUT/npm.log" || true
    exit 0
  fi
fi
WORK=$OUT/work
rm -rf "$WORK"
mkdir -p "$WORK"
cp -r "$SRC/tests/mcp/py_sum_squares" "$WORK/task"
cp "$SRC/tests/mcp/e2e/client.mjs" "$NODE_DIR/client.mjs"
cd "$NODE_DIR"
KF_BIN=$BIN/kf KF_WORK=$WORK timeout 600 node client.mjs
